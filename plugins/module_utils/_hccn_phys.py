# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Pure parsers and judges for the physical-layer answers of ``hccn_tool``: ``-optical -g`` (the RoCE optical
module), ``-link_stat -g`` (link flaps since boot) and ``-stat -g`` (packet / error counters).

Text in, plain dicts out: no I/O, no Ansible imports, stdlib only, Python 3.8+. Formats, with their sources, are in
docs/hccn-physical-formats.md; the recorded samples are the unit-test fixtures ``hccn_optical_*``,
``hccn_link_stat_*`` and ``hccn_stat_*``.

* ``-optical -g`` prints ``optical info:`` then ``key : value`` lines (``present : present`` or ``not present``,
  ``temperature : 47 C``, ``Tx Power0 : 4.4035 mW`` ... ``Rx Power3``, and the module's own thresholds
  ``Temp High Thres``, ``RxPower Low Thres`` ...), and the loss-of-signal / loss-of-lock flags as hex bitmaps
  (``Rx Los Flag : 0xff``, one bit per lane). A module the board cannot talk to answers
  ``Control link unreachable``.
* ``-link_stat -g`` prints ``[devid N]link up count : X`` and the last link changes
  (``[devid N]    Tue Aug  1 14:43:40 2022    LINK DOWN``), newest first; newer drivers add ``link down count``.
* ``-stat -g`` prints ``name:number`` counter lines.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import re

from ansible_collections.ascend.kvpool.plugins.module_utils import _hccn

# (check name, argv after ``hccn_tool -i <id>``)
QUERIES = (
    ("optical", ("-optical", "-g")),
    ("link_stat", ("-link_stat", "-g")),
)
CHECKS = tuple(name for name, _argv in QUERIES)

DEFAULT_FLAP_THRESHOLD = 3

_UNREACHABLE_RE = re.compile(r"control\s+link\s+unreachable", re.I)
_KV_RE = re.compile(r"^([A-Za-z][A-Za-z0-9 _/()\-.]*?)\s*:\s*(.*?)\s*$")
_NUMBER_RE = re.compile(r"^([-+]?\d+(?:\.\d+)?)\s*([A-Za-z%]*)\s*$")
_LANE_RE = re.compile(r"^(tx|rx)\s*power\s*(?:lane\s*)?(\d+)$")
_FLAG_RE = re.compile(r"^(tx|rx)\s*(los|lol)\s*flag$")
_THRESHOLD_RE = re.compile(r"^(temp|vcc|txpower|rxpower|tx power|rx power)\s+(high|low)\s+thres(?:hold)?$")
_HEX_RE = re.compile(r"^(?:0x)?([0-9a-f]+)$", re.I)
_NOT_SUPPORTED = ("not supported", "na", "n/a", "-", "")

_FLAG_WORDS = {"los": "loss of signal", "lol": "loss of lock"}
_QUANTITY = {"temp": "temperature", "vcc": "supply voltage", "txpower": "TX power", "rxpower": "RX power"}


def _key(text):
    return " ".join(text.lower().split())


def _quantity(value):
    """``'4.4035 mW'`` -> (4.4035, 'mW'); ``'47 C'`` -> (47.0, 'C'); unsupported / unparsable -> (None, None)."""
    text = (value or "").strip()
    if text.lower() in _NOT_SUPPORTED:
        return None, None
    match = _NUMBER_RE.match(text)
    if not match:
        return None, None
    try:
        number = float(match.group(1))
    except ValueError:
        return None, None
    if math.isnan(number) or math.isinf(number):
        return None, None
    return number, match.group(2) or None


def _to_dbm(number, unit):
    """Power in dBm (mW converted with 10 log10; 0 mW or less is no light at all: -inf)."""
    if unit is None:
        return None
    low = unit.lower()
    if low == "dbm":
        return number
    if low == "mw":
        return 10.0 * math.log10(number) if number > 0 else float("-inf")
    return None


def _fmt(number, unit):
    text = ("%.4f" % number).rstrip("0").rstrip(".") if number is not None else "?"
    return "%s %s" % (text, unit) if unit else text


def parse_optical(stdout):
    """``-optical -g`` -> {'present', 'unreachable', 'temperature', 'vcc', 'power', 'thresholds', 'flags', 'fields'}.

    ``present`` is True / False / None (not reported); ``temperature`` / ``vcc`` are (number, unit) or None;
    ``power`` maps ``tx`` / ``rx`` to {lane: (number, unit)}; ``thresholds`` maps ``temp`` / ``vcc`` /
    ``txpower`` / ``rxpower`` to {'high': (n, unit), 'low': (n, unit)}; ``flags`` maps ``tx_los`` / ``rx_los`` /
    ``tx_lol`` / ``rx_lol`` to the integer bitmap; ``fields`` keeps every ``key : value`` (lower-cased key).
    """
    text = _hccn._text(stdout)
    result = {"present": None, "unreachable": bool(_UNREACHABLE_RE.search(text)), "temperature": None, "vcc": None,
              "power": {"tx": {}, "rx": {}}, "thresholds": {}, "flags": {}, "fields": {}, "lines": {}}
    for raw in text.split("\n"):
        line = raw.strip()
        match = _KV_RE.match(line)
        if not match:
            continue
        key, value = _key(match.group(1)), match.group(2)
        if key in result["fields"]:
            continue
        result["fields"][key] = value
        result["lines"][key] = line
        if key == "present":
            low = _key(value)
            result["present"] = True if low == "present" else (False if low else None)
        elif key in ("temperature", "temp"):
            number, unit = _quantity(value)
            result["temperature"] = (number, unit) if number is not None else None
        elif key == "vcc":
            number, unit = _quantity(value)
            result["vcc"] = (number, unit) if number is not None else None
        else:
            lane = _LANE_RE.match(key)
            if lane:
                number, unit = _quantity(value)
                if number is not None:
                    result["power"][lane.group(1)][int(lane.group(2))] = (number, unit)
                continue
            flag = _FLAG_RE.match(key)
            if flag:
                hexm = _HEX_RE.match(value.strip())
                if hexm:
                    result["flags"]["%s_%s" % (flag.group(1), flag.group(2))] = int(hexm.group(1), 16)
                continue
            thr = _THRESHOLD_RE.match(key)
            if thr:
                number, unit = _quantity(value)
                if number is not None:
                    name = thr.group(1).replace(" ", "")
                    result["thresholds"].setdefault(name, {})[thr.group(2)] = (number, unit)
    return result


def _outside(value, limits, dbm=False):
    """'above' / 'below' / None for value against the module's {'high', 'low'} thresholds (same unit only,
    powers compared in dBm)."""
    number, unit = value
    for side, test in (("high", lambda v, t: v > t), ("low", lambda v, t: v < t)):
        limit = limits.get(side)
        if limit is None:
            continue
        if dbm:
            v, t = _to_dbm(number, unit), _to_dbm(*limit)
        elif (unit or "").lower() == (limit[1] or "").lower():
            v, t = number, limit[0]
        else:
            v = t = None
        if v is not None and t is not None and test(v, t):
            return side
    return None


def optical_problems(value):
    """Problems of a parsed ``-optical -g`` answer, each {'kind', 'message'}: ``missing``, ``unreachable``,
    ``temperature``, ``voltage``, ``power`` (outside the module's own thresholds), ``alarm`` (LOS / LOL flags)."""
    if value["unreachable"]:
        return [{"kind": "unreachable", "message": "optical module cannot be read (Control link unreachable): "
                                                   "reseat or replace it"}]
    if value["present"] is False:
        return [{"kind": "missing", "message": "optical module not present: plug in (or reseat) the module "
                                               "of this RoCE port"}]
    problems = []
    limits = value["thresholds"]
    for kind, name, reading in (("temperature", "temp", value["temperature"]), ("voltage", "vcc", value["vcc"])):
        if reading is None or name not in limits:
            continue
        side = _outside(reading, limits[name])
        if side:
            word = "above the module's high" if side == "high" else "below the module's low"
            problems.append({"kind": kind, "message": "%s %s %s threshold %s" % (
                _QUANTITY[name], _fmt(*reading), word, _fmt(*limits[name][side]))})
    for direction in ("rx", "tx"):
        name = direction + "power"
        if name not in limits:
            continue
        grouped = []  # lanes with the same reading on the same side are named together
        for lane in sorted(value["power"][direction]):
            reading = value["power"][direction][lane]
            side = _outside(reading, limits[name], dbm=True)
            if not side:
                continue
            for entry in grouped:
                if entry[0] == (side, reading):
                    entry[1].append(lane)
                    break
            else:
                grouped.append(((side, reading), [lane]))
        for (side, reading), lanes in grouped:
            word = "above the module's high" if side == "high" else "below the module's low"
            where = "lane %d" % lanes[0] if len(lanes) == 1 else "lanes %s" % ", ".join(str(n) for n in lanes)
            problems.append({"kind": "power", "message": "%s %s %s %s threshold %s" % (
                _QUANTITY[name], where, _fmt(*reading), word, _fmt(*limits[name][side]))})
    alarms = ["%s %s flag 0x%x (%s)" % (name[:2].upper(), name[3:].upper(), bits, _FLAG_WORDS[name[3:]])
              for name, bits in sorted(value["flags"].items()) if bits]
    if alarms:
        problems.append({"kind": "alarm", "message": "alarm: " + ", ".join(alarms)})
    return problems


_verdict = _hccn._verdict


def _tool_error(check, rc, out, err, value):
    """Verdict for an answer that is a tool error (busy, bad device, nonzero exit without an answer), else None."""
    kind = _hccn.classify_error(rc, out, err)
    first = _hccn._first_line(err, out)
    if kind == "busy":
        return _verdict(check, False, "busy", value, _hccn._ERROR_MESSAGES["busy"], _hccn._first_line(out, err))
    if kind == "invalid_device":
        return _verdict(check, False, "error", value, _hccn._ERROR_MESSAGES["invalid_device"], first)
    if kind is not None:
        return _verdict(check, False, "error", value, "hccn_tool failed (rc %d): %s"
                        % (_hccn._rc(rc), first or "no output"), first)
    return None


def _public(value):
    """The parsed answer without the bookkeeping of raw lines (JSON-friendly lists instead of tuples)."""
    out = dict(value)
    out.pop("lines", None)
    return out


def judge_optical(rc, stdout, stderr):
    """Verdict on ``hccn_tool -i N -optical -g``: {'check', 'ok', 'state', 'value', 'message', 'raw'}.

    ``state`` is ``ok``, ``fail`` (module missing or unreadable, a reading outside the module's own thresholds,
    a LOS / LOL alarm), ``busy`` or ``error``; ``value['problems']`` lists every problem found.
    """
    out, err = _hccn._text(stdout), _hccn._text(stderr)
    value = parse_optical(out + "\n" + err)
    lines = value["lines"]
    value["problems"] = []
    if value["unreachable"]:
        value["problems"] = optical_problems(value)
        raw = _hccn._find_line(_UNREACHABLE_RE, out, err)
        return _verdict("optical", False, "fail", _public(value), value["problems"][0]["message"], raw)
    failed = _tool_error("optical", rc, out, err, _public(value))
    if failed is not None:
        return failed
    if value["present"] is None and not value["fields"]:
        first = _hccn._first_line(out, err)
        return _verdict("optical", False, "error", _public(value),
                        "output not understood: %s" % (first or "hccn_tool printed nothing"), first)
    value["problems"] = optical_problems(value)
    if value["problems"]:
        kinds = [p["kind"] for p in value["problems"]]
        raw_key = "present"
        if "missing" not in kinds:
            raw_key = _raw_key_for(value, kinds[0])
        raw = lines.get(raw_key) or lines.get("present")
        return _verdict("optical", False, "fail", _public(value),
                        "; ".join(p["message"] for p in value["problems"]), raw)
    parts = ["optical module present" if value["present"] else "optical module (presence not reported)"]
    if value["temperature"]:
        parts.append("temperature %s" % _fmt(*value["temperature"]))
    rx = value["power"]["rx"]
    if rx:
        parts.append("RX power %s..%s" % (_fmt(*min(rx.values())), _fmt(*max(rx.values()))))
    if not value["thresholds"]:
        parts.append("no thresholds reported by the module")
    else:
        parts.append("within the module's thresholds")
    return _verdict("optical", True, "ok", _public(value), ", ".join(parts), lines.get("present"))


def _raw_key_for(value, kind):
    """The field whose line best shows the first problem (the tool's own line for the summary)."""
    lines = value["lines"]
    if kind == "temperature":
        return "temperature" if "temperature" in lines else "temp"
    if kind == "voltage":
        return "vcc"
    if kind == "alarm":
        for key in ("rx los flag", "tx los flag", "rx lol flag", "tx lol flag"):
            if key in lines and value["flags"].get(key.replace(" flag", "").replace(" ", "_")):
                return key
    if kind == "power":
        limits = value["thresholds"]
        for direction in ("rx", "tx"):
            name = direction + "power"
            for lane in sorted(value["power"][direction]):
                if name in limits and _outside(value["power"][direction][lane], limits[name], dbm=True):
                    for key in lines:
                        match = _LANE_RE.match(key)
                        if match and match.group(1) == direction and int(match.group(2)) == lane:
                            return key
    return "present"


_LS_PREFIX_RE = re.compile(r"^\[\s*dev(?:ice)?\s*id\s*\d+\s*\]\s*", re.I)
_LS_UP_RE = re.compile(r"^link\s+up\s+count\s*:\s*(\d+)", re.I)
_LS_DOWN_RE = re.compile(r"^link\s+down\s+count\s*:\s*(\d+)", re.I)
_LS_TIME_RE = re.compile(r"^current\s+time\s*:\s*(.*?)\s*$", re.I)
_LS_RECORD_RE = re.compile(r"^(.*?\d{1,2}:\d{2}:\d{2}\s+\d{4})\s+LINK\s+(UP|DOWN)\s*$", re.I)


def parse_link_stat(stdout):
    """``-link_stat -g`` -> {'current_time', 'up_count', 'down_count', 'records': [{'time', 'status'}], 'flaps'}.

    ``records`` are newest first, as printed. ``flaps`` (how often the link went down since boot) is the printed
    ``link down count`` when there is one, else the number of ``LINK DOWN`` records, but at least
    ``link up count - 1`` (the first link up after boot is no flap); None when nothing was understood.
    """
    result = {"current_time": None, "up_count": None, "down_count": None, "records": [], "flaps": None,
              "up_line": None}
    for raw in _hccn._text(stdout).split("\n"):
        line = _LS_PREFIX_RE.sub("", raw.strip()).strip()
        if not line:
            continue
        match = _LS_UP_RE.match(line)
        if match and result["up_count"] is None:
            result["up_count"] = int(match.group(1))
            result["up_line"] = raw.strip()
            continue
        match = _LS_DOWN_RE.match(line)
        if match and result["down_count"] is None:
            result["down_count"] = int(match.group(1))
            continue
        match = _LS_TIME_RE.match(line)
        if match and result["current_time"] is None:
            result["current_time"] = " ".join(match.group(1).split()) or None
            continue
        match = _LS_RECORD_RE.match(line)
        if match:
            result["records"].append({"time": " ".join(match.group(1).split()), "status": match.group(2).upper()})
    downs = sum(1 for r in result["records"] if r["status"] == "DOWN")
    candidates = [downs] if (result["records"] or result["up_count"] is not None) else []
    if result["down_count"] is not None:
        candidates = [result["down_count"]]
    if result["up_count"] is not None:
        candidates.append(max(result["up_count"] - 1, 0))
    result["flaps"] = max(candidates) if candidates else None
    return result


def judge_link_stat(rc, stdout, stderr, flap_threshold=DEFAULT_FLAP_THRESHOLD):
    """Verdict on ``hccn_tool -i N -link_stat -g``: ``fail`` when the link went down more than ``flap_threshold``
    times since boot (the counters are the tool's; the threshold is the operator's)."""
    out, err = _hccn._text(stdout), _hccn._text(stderr)
    value = parse_link_stat(out)
    raw_up = value.pop("up_line")
    failed = _tool_error("link_stat", rc, out, err, value)
    if failed is not None:
        return failed
    if value["flaps"] is None:
        first = _hccn._first_line(out, err)
        return _verdict("link_stat", False, "error", value,
                        "output not understood: %s" % (first or "hccn_tool printed nothing"), first)
    last = value["records"][0] if value["records"] else None
    detail = "link went down %d time(s) since boot" % value["flaps"]
    if value["up_count"] is not None:
        detail += " (link up count %d)" % value["up_count"]
    if last:
        detail += ", last change %s LINK %s" % (last["time"], last["status"])
    raw = raw_up or _hccn._first_line(out)
    if value["flaps"] > int(flap_threshold):
        return _verdict("link_stat", False, "fail", value,
                        "%s: above the flap threshold %d (npu_network_link_flap_threshold); check the cable, the "
                        "optical module and the switch port" % (detail, int(flap_threshold)), raw)
    return _verdict("link_stat", True, "ok", value, detail, raw)


_STAT_RE = re.compile(r"^([A-Za-z][A-Za-z0-9_ .\-/]*?)\s*:\s*([-+]?\d+)\s*$")


def parse_stat(stdout):
    """``-stat -g`` -> {'counters': {name: int}, 'errors': {name: int}} (``errors``: the nonzero counters whose
    name says error, drop or bad)."""
    counters = {}
    for raw in _hccn._text(stdout).split("\n"):
        match = _STAT_RE.match(raw.strip())
        if match:
            name = "_".join(match.group(1).lower().split())
            counters.setdefault(name, int(match.group(2)))
    errors = dict((k, v) for k, v in counters.items()
                  if v and any(word in k for word in ("err", "drop", "bad")))
    return {"counters": counters, "errors": errors}


def judge(check, rc, stdout, stderr, flap_threshold=DEFAULT_FLAP_THRESHOLD):
    """Verdict of one physical-layer query (``optical`` or ``link_stat``)."""
    if check == "optical":
        return judge_optical(rc, stdout, stderr)
    if check == "link_stat":
        return judge_link_stat(rc, stdout, stderr, flap_threshold)
    raise ValueError("unknown physical hccn check %r (known: %s)" % (check, ", ".join(CHECKS)))
