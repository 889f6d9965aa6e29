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


def _snippet(text, limit=160):
    """The start of ``text`` as one printable line (control and non-UTF-8 bytes escaped), at most ``limit`` chars."""
    line = ' / '.join(part.strip() for part in _text(text).split('\n') if part.strip())
    shown = ''.join(c if c.isprintable() else '\\x%02x' % (ord(c) & 0xff) for c in line[:limit])
    return shown + (' ...' if len(line) > limit else '')


def _id_list(ids):
    return ', '.join(str(i) for i in sorted(ids))


MAX_NPU_ID = 63  # well above any Atlas node (8 NPUs on A2, 16 on A3); a larger id is not an NPU id


def table_problem(text, parsed, listed_ids=None):
    """Why the text of an ``npu-smi info`` that exited 0 without a driver error cannot be trusted, else None.

    ``parsed`` is ``parse_info(text)``; ``listed_ids`` the NPU ids of ``npu-smi info -l`` when it answered.
    Caught: no output, output without the NPU table (garbage, an ``Error ...`` printed with exit code 0), a table
    without its Health column, a table that shows fewer NPUs than ``-l`` lists (cut short), NPU ids out of range.
    """
    body = _text(text)
    if not body.strip():
        return 'npu-smi info printed nothing (exit code 0): run it by hand on the node; the driver may be hung'
    for raw in body.split('\n'):
        cells = _cells(raw)
        if cells and cells[0].split()[:2] == ['NPU', 'Name'] and not any('health' in c.lower() for c in cells):
            return ('npu-smi info prints a table without a Health column, which the collection does not know: %s; '
                    'report the npu-smi version' % _snippet(raw))
    shown = set(n['npu'] for n in parsed.get('npus') or [])
    if not shown:
        return ('npu-smi info printed no NPU table (exit code 0): %s; run it by hand on the node' % _snippet(body))
    wrong = sorted(i for i in shown | set(listed_ids or []) if not 0 <= i <= MAX_NPU_ID)
    if wrong:
        return 'npu-smi reports NPU ids %s, outside 0-%d: not an NPU table the collection can trust' % (
            _id_list(wrong), MAX_NPU_ID)
    missing = set(listed_ids or []) - shown
    if missing:
        return ('npu-smi info -l lists NPUs %s but the table of npu-smi info shows only %s (missing %s): the table '
                'is cut short or in a format the collection does not know; run npu-smi info by hand'
                % (_id_list(listed_ids), _id_list(shown) or 'none', _id_list(missing)))
    return None


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


def commands(tool, topology=False):
    """The reads of facts(): the NPU table and the NPU count, and with ``topology`` the topology matrix."""
    argvs = [[tool, 'info'], [tool, 'info', '-l']]
    if topology:
        argvs.append(topo_command(tool))
    return argvs


def read(tool, topology=False, timeout=None):
    """The facts of the npu-smi at ``tool``: its reads (commands()) run concurrently, parsed by facts(); each is
    killed after ``timeout`` seconds (the runner's default when None)."""
    if timeout is None:
        return facts(*run_parallel(commands(tool, topology)))
    return facts(*run_parallel(commands(tool, topology), timeout=timeout))


def facts(info, listing, topo=None):
    """The facts of ``npu-smi info`` and ``npu-smi info -l`` (run results: dicts with rc, stdout, stderr), and of
    ``npu-smi info -t topo`` when ``topo`` is given (key ``topology``: parse_topo() plus the product ``family``
    and its ``expected`` topology in words).

    Returns the facts (driver_loaded, version, count, npus, healthy_npus, unhealthy_npus, processes, busy_npus),
    or ``{'failed': True, 'msg': ...}`` when npu-smi itself failed.
    """
    result = _facts(info, listing)
    if topo is not None and not result.get('failed'):
        matrix = parse_topo(topo['stdout']) if result.get('driver_loaded') else parse_topo('')
        names = [n.get('name') for n in result.get('npus') or [] if n.get('name')]
        family = topo_family(names[0] if names else None, matrix['label'])
        matrix.update(family=family, expected=FAMILIES[family])
        if result.get('driver_loaded') and not matrix['links']:
            matrix['error'] = 'npu-smi info -t topo gave no topology matrix (rc %s): %s' % (
                topo['rc'], (topo['stderr'] or topo['stdout']).strip()[-300:] or 'no output')
        result['topology'] = matrix
    return result


def _facts(info, listing):
    err = driver_error('\n'.join([info['stdout'], info['stderr'], listing['stdout'], listing['stderr']]))
    if err:
        return dict(driver_loaded=False, driver_error=err, driver_message=driver_error_message(err), version=None,
                    count=0, npus=[], healthy_npus=[], unhealthy_npus=[], processes=[], busy_npus=[])
    if info['rc'] != 0:
        return dict(failed=True, msg='npu-smi info failed with rc %s: %s'
                    % (info['rc'], (info['stderr'] or info['stdout']).strip()[-500:]))
    parsed = parse_info(info['stdout'])
    listed = parse_list(listing['stdout']) if listing['rc'] == 0 else {}
    problem = table_problem(info['stdout'], parsed, [n['npu'] for n in listed.get('npus') or []])
    if problem:
        return dict(failed=True, msg=problem)
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


# --------------------------------------------------------------------------------------------------
# npu-smi info -t topo: the NPU-to-NPU connection matrix (docs/hccn-physical-formats.md)

TOPO_LINKS = ("X", "HCCS", "HCCS_SW", "SIO", "PIX", "PXB", "PHB", "SYS", "NA")
_TOPO_ID_RE = re.compile(r"^(NPU|Phy-ID)(\d+)$", re.I)
_TOPO_LEGEND_RE = re.compile(r"^([A-Z][A-Z0-9_#]*)\s*=\s*(.+?)\s*$")


def topo_command(tool):
    """The read of the topology matrix."""
    return [tool, 'info', '-t', 'topo']


def parse_topo(text):
    """``npu-smi info -t topo`` -> {'label', 'ids', 'links', 'affinity', 'legend', 'rows'}.

    ``label`` is ``NPU`` (A2, training series) or ``Phy-ID`` (A3); ``ids`` the column ids in order; ``links``
    maps str(id) -> {str(other id): link word (HCCS, HCCS_SW, SIO, PIX, PXB, PHB, SYS, NA, X)}; ``affinity``
    str(id) -> the CPU affinity text after the links; ``legend`` word -> meaning; ``rows`` str(id) -> the raw row.
    """
    result = {"label": None, "ids": [], "links": {}, "affinity": {}, "legend": {}, "rows": {}}
    for raw in _text(text).split("\n"):
        tokens = raw.split()
        if not tokens:
            continue
        first = _TOPO_ID_RE.match(tokens[0])
        if not first:
            legend = _TOPO_LEGEND_RE.match(raw.strip())
            if legend:
                result["legend"][legend.group(1)] = legend.group(2)
            continue
        rest = tokens[1:]
        if not rest or _TOPO_ID_RE.match(rest[0]) or rest[0].upper() in ("CPU", "NUMA"):
            header = []
            for token in tokens:
                match = _TOPO_ID_RE.match(token)
                if not match:
                    break
                header.append(int(match.group(2)))
            result["ids"] = header
            result["label"] = "Phy-ID" if first.group(1).lower() == "phy-id" else "NPU"
            continue
        width = len(result["ids"])
        links = rest[:width]
        if not width or len(links) < width or not all(t.upper() in TOPO_LINKS for t in links):
            continue
        me = str(int(first.group(2)))
        result["links"][me] = dict((str(other), link.upper()) for other, link in zip(result["ids"], links))
        result["affinity"][me] = " ".join(rest[width:]) or None
        result["rows"][me] = raw.strip()
    return result


# Expected NPU-to-NPU connection per product family (docs/hccn-physical-formats.md, "Expected topology"):
# A2 (910B): HCCS between every pair of the 8 NPUs of a board (Box16: two such sets, 0-7 and 8-15);
# Atlas training series (910A / 910 Pro / Premium): two HCCS rings of 4 (0-3, 4-7);
# A3 (chip name Ascend910, Phy-ID matrix): the two dies of a module (2k, 2k+1) on SIO, all others HCCS_SW (or HCCS);
# inference cards (310P / 310B): no HCCS at all, nothing to check.
FAMILIES = {
    "a2": "Atlas A2 (910B): HCCS between every pair of the 8 NPUs of a board",
    "a3": "Atlas A3 (Ascend910, two dies per module): SIO inside a module, HCCS_SW (or HCCS) between modules",
    "training": "Atlas training series (910A): two HCCS rings of 4 NPUs (0-3, 4-7)",
    "inference": "inference cards (310P / 310B): PCIe only, no HCCS",
    "generic": "unknown model: HCCS, HCCS_SW or SIO between every pair (vllm-ascend KV pool guide)",
}


def topo_family(chip_name=None, label=None):
    """The product family (a key of FAMILIES) from the ``npu-smi info`` chip name, else from the matrix label."""
    raw = (chip_name or "").strip().lower().replace(" ", "")
    name = raw[len("ascend"):] if raw.startswith("ascend") else raw
    if raw == "ascend910" or name.startswith("910c") or name.startswith("910_93"):
        return "a3"
    if name.startswith("910b"):
        return "a2"
    if name in ("910", "910a", "910proa", "910prob", "910premiuma"):
        return "training"
    if name.startswith("310"):
        return "inference"
    if (label or "").lower() == "phy-id":
        return "a3"
    return "generic"


def expected_links(family, a, b):
    """The link words acceptable between NPU ``a`` and ``b`` on this family; an empty tuple means the pair can
    never be HCCS-connected there (different rings or boards); None means the family has no HCCS to check."""
    if family == "inference":
        return None
    if family == "a2":
        return ("HCCS",) if a // 8 == b // 8 else ()
    if family == "training":
        return ("HCCS",) if a // 4 == b // 4 else ()
    if family == "a3":
        return ("SIO",) if a // 2 == b // 2 else ("HCCS_SW", "HCCS")
    return ("HCCS", "HCCS_SW", "SIO")


def judge_topology(topo, groups, chip_name=None):
    """Findings for every NPU pair of each group that is not connected as the node's model should be.

    ``topo`` is ``parse_topo()``'s result, ``groups`` a list of NPU id lists (the NPUs of one instance each).
    Returns (findings, family): findings are {'npu', 'check': 'topology', 'ok', 'state', 'message', 'raw'}
    (``npu`` the lower id of the pair), for the pairs that fail and for NPUs missing from the matrix.
    """
    family = topo_family(chip_name, topo.get("label"))
    findings = []
    if family == "inference":
        return findings, family
    why = FAMILIES[family]
    links = topo.get("links") or {}
    known = set(topo.get("ids") or [])
    for group in groups or []:
        ids = sorted(set(int(n) for n in group))
        missing = [n for n in ids if n not in known]
        for n in missing:
            findings.append({"npu": n, "check": "topology", "ok": False, "state": "error",
                             "message": "NPU %d is not in the npu-smi topology matrix (ids: %s)"
                                        % (n, ", ".join(str(i) for i in topo.get("ids") or []) or "none"),
                             "raw": None})
        for i, a in enumerate(ids):
            for b in ids[i + 1:]:
                if a in missing or b in missing:
                    continue
                link = (links.get(str(a)) or {}).get(str(b)) or (links.get(str(b)) or {}).get(str(a))
                accepted = expected_links(family, a, b)
                if accepted is None or link in accepted:
                    continue
                if accepted == ():
                    message = ("NPU %d <-> NPU %d: %s, the pair is not HCCS-connected on this model (%s); "
                               "give an instance NPUs of one HCCS domain" % (a, b, link or "not reported", why))
                else:
                    message = ("NPU %d <-> NPU %d: %s, expected %s (%s)"
                               % (a, b, link or "not reported", " or ".join(accepted), why))
                rows = topo.get("rows") or {}
                findings.append({"npu": a, "check": "topology", "ok": False, "state": "fail",
                                 "message": message, "raw": rows.get(str(a)) or rows.get(str(b))})
    return findings, family
