# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Pure parsers for ``npu-smi info`` and ``npu-smi info -l``.

Text in, plain dicts and lists out: no I/O, no Ansible imports, stdlib only, Python 3.8+.

``npu-smi info`` prints one pair of table rows per chip: the first row carries NPU id, name, health,
power, temperature and hugepages, the second chip id (A3: chip id and physical id), bus id, AI core
usage, memory and HBM. A2 (910B) boards have one chip per NPU; A3 boards have two, each with its own
pair of rows (the second one with power ``-``). A process table follows.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.ascend.kvpool.plugins.module_utils._runner import run_parallel

DRIVER_ERROR_MARKER = "dcmi module initialize failed"

# ``dcmi module initialize failed. ret is -8005`` (driver not loaded) and the sibling seen when another
# container holds the device: ``dcmi model initialized failed, because the device is used. ret is -8020``.
_DRIVER_ERROR_RE = re.compile(r"dcmi\s+mod(?:ule|el)\s+initiali[sz]ed?\s+failed", re.I)

HEALTHY = "OK"


def _text(value):
    if value is None:
        return ""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    elif not isinstance(value, str):
        value = str(value)
    return value.replace("\r\n", "\n").replace("\r", "\n")


def _to_int(value):
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def _to_float(value):
    text = str(value).strip() if value is not None else ""
    if text in ("", "-", "NA", "N/A"):
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _to_mb(value):
    number = _to_float(value)
    return None if number is None else int(number)


def driver_error(text):
    """The raw line when npu-smi could not talk to the driver (``dcmi module initialize failed...``), else None."""
    for line in _text(text).split("\n"):
        if _DRIVER_ERROR_RE.search(line):
            return line.strip()
    return None


def driver_error_message(raw):
    """Short sentence for a ``driver_error`` line: driver not loaded, or the NPU held by another process."""
    if not raw:
        return None
    low = raw.lower()
    if "device is used" in low or "-8020" in low:
        return "NPU is in use by another process or container (npu-smi cannot open it): %s" % raw.strip()
    return "NPU driver not loaded or not answering (npu-smi cannot initialise dcmi): %s" % raw.strip()


def health_row(text, npu, health):
    """The table row of ``npu info`` that carries this NPU's Health (the operator's raw line), or None."""
    pattern = re.compile(r"^\|\s*%d\s+\S.*\|\s*%s\s*\|" % (int(npu), re.escape(str(health))), re.I)
    for line in _text(text).split("\n"):
        if pattern.match(line.strip()):
            return line.strip()
    return None


def judge_health(health):
    """Only ``OK`` (any case, blanks ignored) is healthy; ``Warning``, ``Alarm``, ``Critical``... are not."""
    if health is None:
        return False
    return str(health).strip().upper() == HEALTHY


_VERSION_RE = re.compile(r"npu-smi\s+(\S+)(?:\s+Version\s*:\s*(\S+))?", re.I)
_NPU_CELL_RE = re.compile(r"^(\d+)\s+(\S.*?)$")
_CHIP_CELL_RE = re.compile(r"^(\d+)(?:\s+(\d+))?$")
_POWER_CELL_RE = re.compile(r"^(\S+)\s+(\S+)(?:\s+(\d+)\s*/\s*(\d+))?$")
_USAGE_CELL_RE = re.compile(r"^(\S+)\s+(\d+)\s*/\s*(\d+)(?:\s+(\d+)\s*/\s*(\d+))?$")
_IDLE_RE = re.compile(r"no\s+running\s+processes\s+found\s+in\s+npu\s+(\d+)", re.I)
_PROC_NPU_RE = re.compile(r"^(\d+)(?:\s+(\d+))?$")
# Health column words (OK, Warning, Alarm, Critical...); the second row has a bus id there instead.
_HEALTH_WORD_RE = re.compile(r"^[A-Za-z][A-Za-z ]*$")


def _is_health_word(cell):
    return bool(_HEALTH_WORD_RE.match(cell)) and cell.upper() != "NA"


def _cells(line):
    """Cells of a ``| a | b | c |`` table row (stripped), or None for rules and other lines."""
    line = line.strip()
    if not line.startswith("|"):
        return None
    body = line[1:]
    if body.endswith("|"):
        body = body[:-1]
    return [cell.strip() for cell in body.split("|")]


def _npu_row(cells):
    """First row of a chip pair: NPU id, name, health, power/temp/hugepages."""
    if len(cells) < 3:
        return None
    match = _NPU_CELL_RE.match(cells[0])
    if not match:
        return None
    row = {
        "npu": int(match.group(1)),
        "name": match.group(2).strip(),
        "health": cells[1] or None,
        "power_w": None,
        "temp_c": None,
        "hugepages_used": None,
        "hugepages_total": None,
    }
    power = _POWER_CELL_RE.match(cells[2])
    if power:
        row["power_w"] = _to_float(power.group(1))
        row["temp_c"] = _to_float(power.group(2))
        row["hugepages_used"] = _to_int(power.group(3)) if power.group(3) is not None else None
        row["hugepages_total"] = _to_int(power.group(4)) if power.group(4) is not None else None
    return row


def _chip_row(cells):
    """Second row of a chip pair: chip id (A3: and physical id), bus id, AI core, memory, HBM."""
    if len(cells) < 3:
        return None
    match = _CHIP_CELL_RE.match(cells[0])
    if not match:
        return None
    row = {
        "chip": int(match.group(1)),
        "phy_id": _to_int(match.group(2)) if match.group(2) is not None else None,
        "bus_id": cells[1] or None,
        "aicore_pct": None,
        "memory_used_mb": None,
        "memory_total_mb": None,
        "hbm_used_mb": None,
        "hbm_total_mb": None,
    }
    usage = _USAGE_CELL_RE.match(cells[2])
    if usage:
        row["aicore_pct"] = _to_float(usage.group(1))
        row["memory_used_mb"] = _to_int(usage.group(2))
        row["memory_total_mb"] = _to_int(usage.group(3))
        if usage.group(4) is not None:
            row["hbm_used_mb"] = _to_int(usage.group(4))
            row["hbm_total_mb"] = _to_int(usage.group(5))
    return row


def _process_row(cells):
    """``| 0       0   | 784778 | VLLMWorker_DP | 30112 |`` (name may be blank; newer tools add columns)."""
    if len(cells) < 4:
        return None
    match = _PROC_NPU_RE.match(cells[0])
    pid = _to_int(cells[1])
    if not match or pid is None:
        return None
    return {
        "npu": int(match.group(1)),
        "chip": _to_int(match.group(2)) if match.group(2) is not None else None,
        "pid": pid,
        "name": cells[2],
        "memory_mb": _to_mb(cells[3]),
    }


def parse_info(text):
    """``npu-smi info`` -> {'version', 'npus': [...], 'processes': [...], 'idle_npus': [...]}.

    One ``npus`` entry per chip row pair: {'npu', 'name', 'health', 'power_w', 'temp_c', 'chip', 'phy_id',
    'bus_id', 'aicore_pct', 'memory_used_mb', 'memory_total_mb', 'hbm_used_mb', 'hbm_total_mb',
    'hugepages_used', 'hugepages_total'} (numbers None when the tool prints ``-``/``NA``).
    ``processes``: {'npu', 'chip', 'pid', 'name', 'memory_mb'}; ``idle_npus``: ids reported with
    ``No running processes found``.
    """
    result = {"version": None, "npus": [], "processes": [], "idle_npus": []}
    pending = None
    in_processes = False
    for raw in _text(text).split("\n"):
        line = raw.strip()
        if not line:
            continue
        if result["version"] is None:
            match = _VERSION_RE.search(line)
            if match and line.startswith("|"):
                result["version"] = match.group(2) or match.group(1)
                continue
        cells = _cells(line)
        if cells is None:
            continue
        joined = " ".join(cells)
        if "process id" in joined.lower() and "process name" in joined.lower():
            in_processes = True
            pending = None
            continue
        if in_processes:
            idle = _IDLE_RE.search(joined)
            if idle:
                npu = int(idle.group(1))
                if npu not in result["idle_npus"]:
                    result["idle_npus"].append(npu)
                continue
            proc = _process_row(cells)
            if proc is not None:
                result["processes"].append(proc)
            continue
        if pending is not None and len(cells) >= 3 and not _is_health_word(cells[1]):
            chip_row = _chip_row(cells)
            if chip_row is not None:
                entry = dict(pending)
                entry.update(chip_row)
                result["npus"].append(entry)
                pending = None
                continue
        npu_row = _npu_row(cells)
        if npu_row is not None:
            pending = npu_row
    return result


_LIST_KV_RE = re.compile(r"^\s*(Total\s+Count|NPU\s+ID|Chip\s+Count)\s*:\s*(\S+)", re.I)


def parse_list(text):
    """``npu-smi info -l`` -> {'total': int|None, 'npus': [{'npu': int, 'chip_count': int|None}]}."""
    result = {"total": None, "npus": []}
    current = None
    for raw in _text(text).split("\n"):
        match = _LIST_KV_RE.match(raw)
        if not match:
            continue
        key = " ".join(match.group(1).lower().split())
        value = _to_int(match.group(2))
        if key == "total count":
            result["total"] = value
        elif key == "npu id" and value is not None:
            current = {"npu": value, "chip_count": None}
            result["npus"].append(current)
        elif key == "chip count" and current is not None:
            current["chip_count"] = value
    return result


# Where npu-smi lies when it is not on PATH (the driver's install locations).
SEARCH_DIRS = ['/usr/local/bin', '/usr/local/sbin', '/usr/local/Ascend/driver/tools']


# The failure of a host without npu-smi (npu_smi_facts, and the npu read of preflight_facts).
NOT_FOUND = ('npu-smi not found on this host (looked on PATH and in %s); install the Ascend driver or set '
             'npu_smi_path' % ', '.join(SEARCH_DIRS))


def commands(tool):
    """The two reads of facts(): the NPU table and the NPU count."""
    return [[tool, 'info'], [tool, 'info', '-l']]


def read(tool):
    """The facts of the npu-smi at ``tool``: its two reads (commands()) run concurrently, parsed by facts()."""
    return facts(*run_parallel(commands(tool)))


def facts(info, listing):
    """The facts of ``npu-smi info`` and ``npu-smi info -l`` (run results: dicts with rc, stdout, stderr).

    Returns the facts (driver_loaded, version, count, npus, healthy_npus, unhealthy_npus, processes, busy_npus),
    or ``{'failed': True, 'msg': ...}`` when npu-smi itself failed.
    """
    err = driver_error('\n'.join([info['stdout'], info['stderr'], listing['stdout'], listing['stderr']]))
    if err:
        return dict(driver_loaded=False, driver_error=err, driver_message=driver_error_message(err), version=None,
                    count=0, npus=[], healthy_npus=[], unhealthy_npus=[], processes=[], busy_npus=[])
    if info['rc'] != 0:
        return dict(failed=True, msg='npu-smi info failed with rc %s: %s'
                    % (info['rc'], (info['stderr'] or info['stdout']).strip()[-500:]))
    parsed = parse_info(info['stdout'])
    listed = parse_list(listing['stdout']) if listing['rc'] == 0 else {}
    npus = []
    for n in parsed.get('npus') or []:
        n = dict(n)
        n['healthy'] = judge_health(n.get('health'))
        npus.append(n)
    processes = parsed.get('processes') or []
    count = listed.get('total')
    if count is None:
        count = len(set(n['npu'] for n in npus))
    return dict(
        driver_loaded=True,
        version=parsed.get('version'),
        count=count,
        npus=npus,
        healthy_npus=sorted(set(n['npu'] for n in npus if n['healthy'])),
        unhealthy_npus=[{'npu': n['npu'], 'health': n.get('health'),
                         'raw': health_row(info['stdout'], n['npu'], n.get('health'))}
                        for n in npus if not n['healthy']],
        processes=processes,
        busy_npus=sorted(set(pr['npu'] for pr in processes)),
    )
