# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Pure parsers and judges for ``hccn_tool`` answers and ``/etc/hccn.conf``.

Text in, plain dicts and lists out: no I/O, no Ansible imports, stdlib only, Python 3.8+.

Facts the code relies on (open-sourced hccn_tool, repo ``hicann/driver``,
``src/custom/network/hccn/ascend910B/hccn_tool/``):

* answers are printed with ``TOOL_PRINT_INFO`` (stdout), errors with ``TOOL_PRINT_ERR`` (stderr);
  a few retry hints (``hccn_tool is busy, please try again.``) are "info" level and land on stdout;
* the exit code is the low byte of an internal ``UDA_*`` error code (``ossl_user_linux.h``), e.g.
  0x1004 invalid device id -> 4, 0x4001 ``Command execute failed!`` -> 1, 0x4002 no gateway -> 2,
  0x400D no IP -> 13, 0x300B busy -> 11, 0x200E no TLS certificate -> 14;
* "bad state" answers (link DOWN, net health Fault) exit 0: judge the text, not the exit code.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# (check name, argv after ``hccn_tool -i <id>``), in the order operators run them.
QUERIES = (
    ("lldp", ("-lldp", "-g")),
    ("link", ("-link", "-g")),
    ("net_health", ("-net_health", "-g")),
    ("netdetect", ("-netdetect", "-g")),
    ("gateway", ("-gateway", "-g")),
    ("ip", ("-ip", "-g")),
    ("tls", ("-tls", "-g")),
)

CHECKS = tuple(name for name, _argv in QUERIES)

BUSY_MARKER = "hccn_tool is busy"

# Other "try again" answers of the real tool (hicann/driver src/custom/network/hccn/hccn_tool/src/cmd.c):
# UDA_DSMI_GET_LOCK_FAILED and UDA_TOOL_HCCS_PING_RESOURCE_BUSY. Retrying is the right move for them too.
_BUSY_MARKERS = (
    BUSY_MARKER,
    "get lock failed. please try again",
    "the device is occupied. please try again later",
)

_INVALID_DEVICE_MARKERS = (
    "get invalid device id",  # UDA_MAJOR_CMD_DEV_ID_ERR, rc 4
    "the device is not exist",  # UDA_DSMI_DEV_NOT_EXIST_ERR, rc 4
)

_NO_IP_RE = re.compile(r"get\s+ip(?:conf)?\s+failed.*no\s+ip\s+was\s+preset", re.I)
_NO_GATEWAY_RE = re.compile(r"no\s+gateway\s+was\s+preset", re.I)
_NO_NETDETECT_RE = re.compile(r"no\s+(?:netdetect|net\s*detect)\b.*(?:preset|set|configured)", re.I)
_NO_CERT_RE = re.compile(r"no\s+certificate\s+found", re.I)
_CMD_FAILED_RE = re.compile(r"(?:command|cmd)\s+execute\s+failed|execute\s+failed\s*:", re.I)

UNSET_ADDRESS = "0.0.0.0"

# net health codes of the real tool (tool_ops.c, g_net_health_status), lower-cased spelling -> canonical.
NET_HEALTH_STATES = (
    "Success",
    "Socket fail",
    "Receive timeout",
    "Unreachable",
    "Time exceeded",
    "Fault",
    "Init",
    "Thread error",
    "Detect ip set",
    "Unknown",
)
NET_HEALTH_TRANSIENT = ("Init", "Detect ip set")
_NET_HEALTH_ALIASES = {
    "socket failed": "Socket fail",  # spelling seen in published operator notes
    "receive time out": "Receive timeout",
    "recv timeout": "Receive timeout",
}

# --------------------------------------------------------------------------------------------------
# text helpers


def _text(value):
    """Return ``value`` as text with ``\\n`` line ends (None -> '', bytes decoded, CRLF/CR folded)."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    elif not isinstance(value, str):
        value = str(value)
    return value.replace("\r\n", "\n").replace("\r", "\n")


def _lines(value):
    """Non-empty lines of ``value``, stripped."""
    return [line.strip() for line in _text(value).split("\n") if line.strip()]


def _first_line(*texts):
    for text in texts:
        lines = _lines(text)
        if lines:
            return lines[0]
    return ""


def _find_line(pattern, *texts):
    """First stripped line (of any of ``texts``) that matches ``pattern``, or ''."""
    for text in texts:
        for line in _lines(text):
            if pattern.search(line):
                return line
    return ""


def _rc(rc):
    try:
        return int(rc)
    except (TypeError, ValueError):
        return -1


def _to_int(value):
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def _address(value):
    """Address string, or None when empty/unset (``0.0.0.0`` is the tool's "nothing configured")."""
    if value is None:
        return None
    value = value.strip().strip(",;")
    if not value or value == UNSET_ADDRESS:
        return None
    return value


# --------------------------------------------------------------------------------------------------
# error classification


def is_busy(stdout, stderr):
    """True when hccn_tool asked to be retried (``hccn_tool is busy, please try again.``)."""
    low = (_text(stdout) + "\n" + _text(stderr)).lower()
    return any(marker in low for marker in _BUSY_MARKERS)


_NETDETECT_LINE_RE = re.compile(r"^net\s*detect\s+addr(?:ess)?\s*:\s*(\S*)", re.I)
_GATEWAY_LINE_RE = re.compile(r"^default\s+gateway\s*:\s*([^,\s]*)\s*(?:,\s*iface\s*:\s*(\S+))?", re.I)


def _netdetect_unset(stdout):
    for line in _lines(stdout):
        match = _NETDETECT_LINE_RE.match(line)
        if match and _address(match.group(1)) is None:
            return True
    return False


def classify_error(rc, stdout, stderr):
    """Classify an hccn_tool answer.

    Returns None for a normal answer, else one of ``busy``, ``invalid_device``, ``no_ip``, ``no_gateway``,
    ``no_netdetect``, ``no_certificate``, ``command_failed`` (``Command execute failed!`` and the like,
    e.g. a ping that got no answer) or ``error`` (any other nonzero exit or an answer on stderr only).
    """
    out, err = _text(stdout), _text(stderr)
    both = out + "\n" + err
    low = both.lower()
    if is_busy(out, err):
        return "busy"
    if any(marker in low for marker in _INVALID_DEVICE_MARKERS):
        return "invalid_device"
    if _NO_IP_RE.search(both):
        return "no_ip"
    if _NO_GATEWAY_RE.search(both):
        return "no_gateway"
    if _NO_NETDETECT_RE.search(both) or _netdetect_unset(out):
        return "no_netdetect"
    if _NO_CERT_RE.search(both):
        return "no_certificate"
    code = _rc(rc)
    stderr_only = bool(err.strip()) and not out.strip()
    if code != 0 or stderr_only:
        if _CMD_FAILED_RE.search(both):
            return "command_failed"
        return "error"
    return None


# --------------------------------------------------------------------------------------------------
# parsers (stdout text -> dict, fields not found are None)

_LINK_RE = re.compile(r"^link\s+status\s*:\s*([A-Za-z]+)", re.I)


def parse_link(stdout):
    """``link status: UP`` -> {'status': 'UP'}; DOWN likewise; anything else -> None."""
    for line in _lines(stdout):
        match = _LINK_RE.match(line)
        if match:
            value = match.group(1).upper()
            return {"status": value if value in ("UP", "DOWN") else None, "raw_status": match.group(1)}
    return {"status": None, "raw_status": None}


_NET_HEALTH_RE = re.compile(r"^net\s*health\s+status\s*:\s*(.*?)\s*$", re.I)


def normalize_net_health(value):
    """Canonical spelling of a net health state (``socket failed`` -> ``Socket fail``), or the input stripped."""
    if value is None:
        return None
    text = " ".join(str(value).split())
    if not text:
        return None
    low = text.lower()
    if low in _NET_HEALTH_ALIASES:
        return _NET_HEALTH_ALIASES[low]
    for state in NET_HEALTH_STATES:
        if state.lower() == low:
            return state
    return text


def parse_net_health(stdout):
    """``net health status: Success`` -> {'status': 'Success', 'raw_status': 'Success', ...}."""
    for line in _lines(stdout):
        match = _NET_HEALTH_RE.match(line)
        if match:
            raw = match.group(1)
            status = normalize_net_health(raw)
            return {
                "status": status,
                "raw_status": raw or None,
                "known": status in NET_HEALTH_STATES,
                "transient": status in NET_HEALTH_TRANSIENT,
            }
    return {"status": None, "raw_status": None, "known": False, "transient": False}


_IPADDR_RE = re.compile(r"^ipaddr\s*:\s*(\S*)", re.I)
_NETMASK_RE = re.compile(r"^netmask\s*:\s*(\S*)", re.I)


def parse_ip(stdout):
    """``ipaddr:29.1.112.213`` / ``netmask:255.255.0.0`` -> {'ipaddr', 'netmask'}."""
    result = {"ipaddr": None, "netmask": None}
    for line in _lines(stdout):
        match = _IPADDR_RE.match(line)
        if match and result["ipaddr"] is None:
            result["ipaddr"] = _address(match.group(1))
            continue
        match = _NETMASK_RE.match(line)
        if match and result["netmask"] is None:
            result["netmask"] = match.group(1).strip() or None
    return result


def parse_netdetect(stdout):
    """``netdetect addr: X`` (also ``netdetect address: X``) -> {'address': X}.

    ``0.0.0.0`` (what the tool answers when no netdetect address is configured) gives address None
    and ``unset`` True.
    """
    for line in _lines(stdout):
        match = _NETDETECT_LINE_RE.match(line)
        if match:
            raw = match.group(1).strip()
            address = _address(raw)
            return {"address": address, "raw_address": raw or None, "unset": address is None}
    return {"address": None, "raw_address": None, "unset": False}


def parse_gateway(stdout):
    """``default gateway:11.12.165.1, Iface:eth0`` -> {'address': '11.12.165.1', 'iface': 'eth0'}."""
    for line in _lines(stdout):
        match = _GATEWAY_LINE_RE.match(line)
        if match:
            iface = match.group(2)
            return {"address": _address(match.group(1)), "iface": iface.strip(",;") if iface else None}
    return {"address": None, "iface": None}


_TLS_SWITCH_RE = re.compile(r"tls\s+switch\s*\[\s*(\d+)\s*\]", re.I)
_TLS_PRECONF_RE = re.compile(r"tls\s+preconfigured\s*\[\s*(\d+)\s*\]", re.I)
_TLS_ALARM_RE = re.compile(r"alarm\s+time\s+threshold\s*\[\s*(\d+)\s*\]", re.I)
_TLS_DEV_RE = re.compile(r"^(?:dev_id\s*:\s*|device\s+)(\d+)\s*,", re.I)
_TLS_CERT_RE = re.compile(r"^(?:dev_id\s*:\s*|device\s+)\d+\s*,\s*\[([^\]]+)\]\s*info", re.I)
_TLS_FIELD_RE = re.compile(r"^(subject|issuer|start_time|end_time)\s*\[(.*)\]\s*$", re.I)
_TLS_EXPIRY_RE = re.compile(r"tls\s+expiration\s+status\s*\[\s*(\d+)\s*\]", re.I)


def parse_tls(stdout):
    """``-tls -g`` answer -> {'switch', 'preconfigured', 'alarm_days', 'certificate', ...}.

    ``switch``/``preconfigured``/``alarm_days`` are ints (None when absent: older drivers omit
    ``tls preconfigured[..]``). ``certificate`` is True when certificate blocks are listed, False on
    ``No certificate found``, else None. ``certs`` lists the blocks; ``expiration_status`` is the worst
    ``tls expiration status[n]`` seen (0 normal, 1 near expiration, 2 expired). Pass stdout and stderr
    together to see an expired certificate: the tool prints that status line on stderr.
    """
    result = {
        "dev_id": None,
        "switch": None,
        "preconfigured": None,
        "alarm_days": None,
        "certificate": None,
        "certs": [],
        "expiration_status": None,
    }
    current = None
    for line in _lines(stdout):
        match = _TLS_SWITCH_RE.search(line)
        if match and result["switch"] is None:
            result["switch"] = int(match.group(1))
            dev = _TLS_DEV_RE.match(line)
            if dev:
                result["dev_id"] = int(dev.group(1))
            pre = _TLS_PRECONF_RE.search(line)
            if pre:
                result["preconfigured"] = int(pre.group(1))
            alarm = _TLS_ALARM_RE.search(line)
            if alarm:
                result["alarm_days"] = int(alarm.group(1))
            continue
        match = _TLS_CERT_RE.match(line)
        if match:
            current = {"type": match.group(1).strip(), "subject": None, "issuer": None,
                       "start_time": None, "end_time": None, "expiration_status": None}
            result["certs"].append(current)
            continue
        match = _TLS_FIELD_RE.match(line)
        if match and current is not None:
            current[match.group(1).lower()] = match.group(2).strip()
            continue
        match = _TLS_EXPIRY_RE.search(line)
        if match:
            status = int(match.group(1))
            if current is not None and current["expiration_status"] is None:
                current["expiration_status"] = status
            if result["expiration_status"] is None or status > result["expiration_status"]:
                result["expiration_status"] = status
            continue
        if _NO_CERT_RE.search(line):
            result["certificate"] = False
    if result["certs"]:
        result["certificate"] = True
    return result


_TLV_HEADER_RE = re.compile(r"^([A-Za-z][A-Za-z0-9 /()\-.]*?)\s+TLV\s*$")


def _lldp_blocks(stdout):
    """[(tlv name, [content lines])] in order; lines before the first header go under ''."""
    blocks = [("", [])]
    for raw in _text(stdout).split("\n"):
        line = raw.strip()
        if not line:
            continue
        match = _TLV_HEADER_RE.match(line)
        if match:
            blocks.append((" ".join(match.group(1).split()).lower(), []))
        else:
            blocks[-1][1].append(line)
    return blocks


def _kv(line):
    if ":" not in line:
        return None, line
    key, value = line.split(":", 1)
    return key.strip().lower(), value.strip()


def parse_lldp(stdout):
    """lldptool-style TLV blocks of ``-lldp -g`` -> neighbour facts.

    Keys: chassis_mac, chassis_id, port_ifname (the switch port, e.g. ``400GE1/1/20:2``), port_id,
    port_description, system_name, system_description, mgmt_ipv4, max_frame_size (int), ttl (int),
    tlvs (names seen, in order).
    """
    result = {
        "chassis_mac": None,
        "chassis_id": None,
        "port_ifname": None,
        "port_id": None,
        "port_description": None,
        "system_name": None,
        "system_description": None,
        "mgmt_ipv4": None,
        "max_frame_size": None,
        "ttl": None,
        "tlvs": [],
    }
    for name, content in _lldp_blocks(stdout):
        if not name:
            continue
        result["tlvs"].append(name)
        first = content[0] if content else None
        if name == "chassis id":
            for line in content:
                key, value = _kv(line)
                if key == "mac" and result["chassis_mac"] is None:
                    result["chassis_mac"] = value or None
                if result["chassis_id"] is None:
                    result["chassis_id"] = value or None
        elif name == "port id":
            for line in content:
                key, value = _kv(line)
                if key == "ifname" and result["port_ifname"] is None:
                    result["port_ifname"] = value or None
                if result["port_id"] is None:
                    result["port_id"] = value or None
        elif name == "port description":
            result["port_description"] = first
        elif name == "system name":
            result["system_name"] = first
        elif name == "system description":
            result["system_description"] = "\n".join(content) or None
        elif name == "management address":
            for line in content:
                key, value = _kv(line)
                if key == "ipv4" and result["mgmt_ipv4"] is None:
                    result["mgmt_ipv4"] = value or None
        elif name == "maximum frame size":
            result["max_frame_size"] = _to_int(first) if first else None
        elif name == "time to live":
            result["ttl"] = _to_int(first) if first else None
    if result["port_ifname"] is None and "port id" not in result["tlvs"]:
        # no TLV structure (e.g. output already filtered through ``grep Ifname``)
        line = _find_line(re.compile(r"^ifname\s*:", re.I), stdout)
        if line:
            result["port_ifname"] = _kv(line)[1] or None
    return result


_PING_HEAD_RE = re.compile(r"^device\s+(\d+)\s+PING6?\s+(\S+)", re.I)
_PING_RECV_RE = re.compile(r"^recv\s+seq\s*[=:]\s*(\d+)\s*,\s*time\s*[=:]\s*([\d.]+)\s*ms", re.I)
_PING_TIMEOUT_RE = re.compile(r"recv\s+time\s*out\s+seq\s*[=:]\s*(\d+)", re.I)
_PING_SENDFAIL_RE = re.compile(r"pkt\s+send\s+fail\s+seq\s*[=:]\s*(\d+)", re.I)
_PING_SUMMARY_RE = re.compile(
    r"(\d+)\s+packets?\s+transmitted\s*,\s*(\d+)\s+(?:packets?\s+)?received\s*,\s*([\d.]+)\s*%\s*packet\s+loss", re.I
)
_PING_BAD_MARKERS = ("Destination Host Unreachable", "Message too long")
_PING_FAILURE_LINE_RE = re.compile(r"unreachable|message too long|time\s*out\s+seq|send\s+fail\s+seq", re.I)
PING_PACKETS = 3  # hccn_tool -ping always sends 3 packets


def parse_ping(rc, stdout, stderr):
    """``-ping -g address X`` answer -> {'target', 'transmitted', 'received', 'loss_pct', 'rtt_ms', ...}.

    ok only when received == transmitted > 0 and no ``recv time out`` / ``Destination Host Unreachable``
    / ``Message too long`` line. ``Command execute failed!`` with no summary counts as 3 sent, 0 received.
    """
    out, err = _text(stdout), _text(stderr)
    result = {
        "device": None,
        "target": None,
        "transmitted": None,
        "received": None,
        "loss_pct": None,
        "rtt_ms": [],
        "rtt_avg_ms": None,
        "timeouts": [],
        "send_failures": [],
        "unreachable": False,
        "message_too_long": False,
        "ok": False,
        "error": None,
    }
    summary_line = ""
    for line in _lines(out) + _lines(err):
        match = _PING_HEAD_RE.match(line)
        if match and result["target"] is None:
            result["device"] = int(match.group(1))
            result["target"] = match.group(2)
            continue
        match = _PING_RECV_RE.match(line)
        if match:
            result["rtt_ms"].append(float(match.group(2)))
            continue
        match = _PING_TIMEOUT_RE.search(line)
        if match:
            result["timeouts"].append(int(match.group(1)))
            continue
        match = _PING_SENDFAIL_RE.search(line)
        if match:
            result["send_failures"].append(int(match.group(1)))
            continue
        match = _PING_SUMMARY_RE.search(line)
        if match and not summary_line:
            summary_line = line
            result["transmitted"] = int(match.group(1))
            result["received"] = int(match.group(2))
            result["loss_pct"] = float(match.group(3))
            continue
        low = line.lower()
        if _PING_BAD_MARKERS[0].lower() in low:
            result["unreachable"] = True
        if _PING_BAD_MARKERS[1].lower() in low:
            result["message_too_long"] = True
    if result["rtt_ms"]:
        result["rtt_avg_ms"] = round(sum(result["rtt_ms"]) / len(result["rtt_ms"]), 6)
    busy = is_busy(out, err)
    failed_cmd = bool(_CMD_FAILED_RE.search(out + "\n" + err))
    if result["transmitted"] is None:
        seen = len(result["rtt_ms"]) + len(result["timeouts"]) + len(result["send_failures"])
        if seen:
            result["transmitted"] = seen
            result["received"] = len(result["rtt_ms"])
        elif failed_cmd:
            result["transmitted"] = PING_PACKETS
            result["received"] = 0
        if result["transmitted"]:
            lost = result["transmitted"] - result["received"]
            result["loss_pct"] = round(100.0 * lost / result["transmitted"], 2)
    bad = bool(result["timeouts"] or result["send_failures"] or result["unreachable"] or result["message_too_long"])
    result["ok"] = bool(
        not busy
        and result["transmitted"]
        and result["received"] == result["transmitted"]
        and not bad
    )
    if not result["ok"]:
        result["error"] = (
            _find_line(_PING_FAILURE_LINE_RE, out, err)
            or _first_line(err)
            or summary_line
            or _first_line(out)
            or ("no answer (rc %d)" % _rc(rc))
        )
    return result


# --------------------------------------------------------------------------------------------------
# judge


def _verdict(check, ok, state, value, message, raw):
    return {"check": check, "ok": bool(ok), "state": state, "value": value, "message": message, "raw": raw}


_RAW_PATTERNS = {
    "link": re.compile(r"^link\s+status", re.I),
    "net_health": re.compile(r"^net\s*health", re.I),
    "ip": re.compile(r"^ipaddr", re.I),
    "netdetect": re.compile(r"^net\s*detect", re.I),
    "gateway": re.compile(r"^default\s+gateway", re.I),
    "tls": re.compile(r"tls\s+switch", re.I),
    "lldp": re.compile(r"^ifname\s*:", re.I),
    "ping": re.compile(r"packets?\s+transmitted", re.I),
}

_ERROR_MESSAGES = {
    "busy": "hccn_tool is busy, retry in a moment",
    "invalid_device": "invalid device id (driver not loaded or no such NPU)",
    "no_ip": "no IP address configured",
    "no_gateway": "no default gateway configured",
    "no_netdetect": "no netdetect address configured (net health cannot reach Success without one)",
    "no_certificate": "no TLS certificate installed",
}

# error class -> the check for which it is a finding (fail) rather than a tool error
_FINDING_FOR = {
    "no_ip": "ip",
    "no_gateway": "gateway",
    "no_netdetect": "netdetect",
}


def _parse_for(check, out, err):
    if check == "link":
        return parse_link(out)
    if check == "net_health":
        return parse_net_health(out)
    if check == "ip":
        return parse_ip(out)
    if check == "netdetect":
        return parse_netdetect(out)
    if check == "gateway":
        return parse_gateway(out)
    if check == "tls":
        return parse_tls(out + "\n" + err)
    if check == "lldp":
        return parse_lldp(out)
    raise ValueError("unknown hccn check %r (known: %s)" % (check, ", ".join(CHECKS + ("ping",))))


def _understood(check, value):
    """Did the parser find the answer this check asks for (good or bad)?"""
    if check == "link":
        return value["status"] is not None
    if check == "net_health":
        return value["status"] is not None
    if check == "ip":
        return value["ipaddr"] is not None or value["netmask"] is not None
    if check == "netdetect":
        return value["address"] is not None or value["unset"]
    if check == "gateway":
        return value["address"] is not None or value["iface"] is not None
    if check == "tls":
        return value["switch"] is not None or value["certificate"] is not None
    if check == "lldp":
        return bool(value["tlvs"]) or value["port_ifname"] is not None
    return False


def _judge_value(check, value, raw):
    """Verdict for an understood answer."""
    if check == "link":
        status = value["status"]
        return _verdict(check, status == "UP", "ok" if status == "UP" else "fail", value, "link is %s" % status, raw)
    if check == "net_health":
        status = value["status"]
        if status == "Success":
            return _verdict(check, True, "ok", value, "net health is Success", raw)
        if value["transient"]:
            return _verdict(check, False, "transient", value,
                            "net health %s: detection still starting, re-check in a few seconds" % status, raw)
        return _verdict(check, False, "fail", value, "net health is %s (only Success is healthy)" % status, raw)
    if check == "ip":
        if value["ipaddr"] and value["netmask"]:
            return _verdict(check, True, "ok", value, "IP %s netmask %s" % (value["ipaddr"], value["netmask"]), raw)
        if value["ipaddr"]:
            return _verdict(check, False, "fail", value, "IP %s has no netmask" % value["ipaddr"], raw)
        return _verdict(check, False, "fail", value, "no IP address configured", raw)
    if check == "netdetect":
        if value["address"]:
            return _verdict(check, True, "ok", value, "netdetect address %s" % value["address"], raw)
        return _verdict(check, False, "fail", value, _ERROR_MESSAGES["no_netdetect"], raw)
    if check == "gateway":
        if value["address"]:
            where = " on %s" % value["iface"] if value["iface"] else ""
            return _verdict(check, True, "ok", value, "default gateway %s%s" % (value["address"], where), raw)
        return _verdict(check, False, "fail", value, "no default gateway configured", raw)
    if check == "tls":
        if value["switch"] is None:
            return _verdict(check, True, "ok", value, "no TLS certificate installed (tls switch not reported)", raw)
        words = {0: "disabled", 1: "enabled"}
        message = "tls switch %d (%s)" % (value["switch"], words.get(value["switch"], "unknown value"))
        if value["expiration_status"] == 2:
            message += ", a certificate has expired"
        elif value["expiration_status"] == 1:
            message += ", a certificate is near expiration"
        return _verdict(check, True, "ok", value, message, raw)
    if check == "lldp":
        if value["port_ifname"]:
            return _verdict(check, True, "ok", value, "LLDP neighbour port %s" % value["port_ifname"], raw)
        return _verdict(check, False, "fail", value, "LLDP answer names no neighbour port (no Ifname)", raw)
    raise ValueError("unknown hccn check %r" % check)


def _judge_ping(rc, out, err):
    value = parse_ping(rc, out, err)
    summary = _find_line(_RAW_PATTERNS["ping"], out, err)
    raw = summary or _first_line(err, out)
    label = "ping %s" % value["target"] if value["target"] else "ping"
    if is_busy(out, err):
        return _verdict("ping", False, "busy", value, _ERROR_MESSAGES["busy"], _first_line(out, err))
    if classify_error(rc, out, err) == "invalid_device":
        return _verdict("ping", False, "error", value, _ERROR_MESSAGES["invalid_device"], _first_line(err, out))
    if value["ok"]:
        message = "%s: %s/%s received" % (label, value["received"], value["transmitted"])
        if value["rtt_avg_ms"] is not None:
            message += ", avg %.3f ms" % value["rtt_avg_ms"]
        return _verdict("ping", True, "ok", value, message, raw)
    if value["transmitted"]:
        message = "%s: %s/%s received (%s%% loss)" % (
            label, value["received"], value["transmitted"], _pct(value["loss_pct"]))
        if value["error"] and value["error"] != summary:
            message += ": %s" % value["error"]
        return _verdict("ping", False, "fail", value, message, raw or value["error"])
    return _verdict("ping", False, "error", value, "%s: %s" % (label, value["error"]), value["error"])


def _pct(value):
    if value is None:
        return "?"
    return ("%.2f" % value).rstrip("0").rstrip(".")


def judge(check, rc, stdout, stderr):
    """Verdict on one hccn_tool answer.

    Returns {'check', 'ok', 'state', 'value', 'message', 'raw'}; ``state`` is ``ok``, ``fail``,
    ``transient`` (net health Init / Detect ip set), ``busy`` or ``error`` (tool error, unknown output).
    ``raw`` is the single most relevant line the tool printed. The text decides, not the exit code.
    """
    out, err = _text(stdout), _text(stderr)
    if check == "ping":
        return _judge_ping(rc, out, err)
    value = _parse_for(check, out, err)
    kind = classify_error(rc, out, err)
    first = _first_line(err, out)

    if kind == "busy":
        return _verdict(check, False, "busy", value, _ERROR_MESSAGES["busy"], _first_line(out, err))
    if kind == "invalid_device":
        return _verdict(check, False, "error", value, _ERROR_MESSAGES["invalid_device"], first)
    if kind in _FINDING_FOR and _FINDING_FOR[kind] == check:
        raw = _find_line(_RAW_PATTERNS[check], out) or first
        return _verdict(check, False, "fail", value, _ERROR_MESSAGES[kind], raw)
    if kind == "no_certificate" and check == "tls" and value["switch"] is None:
        return _verdict(check, True, "ok", value, "no TLS certificate installed (tls switch not reported)", first)

    if _understood(check, value):
        raw = _find_line(_RAW_PATTERNS[check], out, err) or _first_line(out, err)
        return _judge_value(check, value, raw)

    if kind is not None:
        if kind in _ERROR_MESSAGES:
            message = "%s (unexpected for the %s check)" % (_ERROR_MESSAGES[kind], check)
        else:
            message = "hccn_tool failed (rc %d): %s" % (_rc(rc), first or "no output")
        return _verdict(check, False, "error", value, message, first)
    if check == "lldp" and not out.strip() and not err.strip():
        return _verdict(check, False, "fail", value, "no LLDP neighbour reported (empty answer)", "")
    if not first:
        return _verdict(check, False, "error", value, "output not understood: hccn_tool printed nothing", "")
    return _verdict(check, False, "error", value, "output not understood: %s" % first, first)


# --------------------------------------------------------------------------------------------------
# /etc/hccn.conf

_CONF_KEY_RE = re.compile(r"^(.+?)_(\d+)$")


def parse_hccn_conf(text):
    """``/etc/hccn.conf`` -> {'devices': {id: {key: value}}, 'other': {...}, 'errors': [...], 'warnings': [...]}.

    One ``key_<device id>=value`` per line (address, netmask, netdetect, gateway, send_arp_status, tls_enable,
    mtu, bond_address, udhcpc_enable, ...). Blank lines and ``#`` comments are skipped; other lines without
    ``=`` land in ``errors``. Like hccn_tool itself (cfg.c reads the first match), the first of duplicate keys
    wins; duplicates, CRLF line ends and blanks around ``=`` (which hccn_tool does not strip) are reported in
    ``warnings``.
    """
    raw_text = "" if text is None else text
    if isinstance(raw_text, bytes):
        raw_text = raw_text.decode("utf-8", "replace")
    result = {"devices": {}, "other": {}, "errors": [], "warnings": []}
    if "\r" in raw_text:
        result["warnings"].append("CRLF line ends: hccn_tool reads the CR as part of each value")
    for number, raw in enumerate(_text(raw_text).split("\n"), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if "=" not in line:
            result["errors"].append(line)
            continue
        key_part, value_part = line.split("=", 1)
        key, value = key_part.strip(), value_part.strip()
        if not key:
            result["errors"].append(line)
            continue
        if key_part != key_part.strip() or value_part != value_part.strip() or raw != raw.lstrip():
            result["warnings"].append("line %d: blanks around %r are not stripped by hccn_tool" % (number, key))
        match = _CONF_KEY_RE.match(key)
        if match:
            device = int(match.group(2))
            target = result["devices"].setdefault(device, {})
            name = match.group(1)
        else:
            target = result["other"]
            name = key
        if name in target:
            if target[name] != value:
                result["warnings"].append("line %d: duplicate %s=%s ignored, hccn_tool uses the first value %s"
                                          % (number, key, value, target[name]))
            continue
        target[name] = value
    return result


def _device_id(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return value


def compare_conf_with_live(conf_devices, live):
    """Mismatches between hccn.conf addresses and the live ``-ip -g`` addresses.

    ``conf_devices`` is ``parse_hccn_conf(...)['devices']``; ``live`` maps device id -> ipaddr (or None).
    Returns [{'device', 'conf_address', 'live_address', 'message'}] for every device of either side whose
    hccn.conf address is missing or differs from the live one, sorted by device.
    """
    conf = {}
    for device, keys in (conf_devices or {}).items():
        conf[_device_id(device)] = (keys or {}).get("address")
    current = {}
    for device, address in (live or {}).items():
        current[_device_id(device)] = address
    mismatches = []
    for device in sorted(set(conf) | set(current), key=lambda item: (not isinstance(item, int), str(item))):
        conf_address = (conf.get(device) or "").strip() or None
        live_address = (current.get(device) or "").strip() or None
        if conf_address is not None and conf_address == live_address:
            continue
        if conf_address is None:
            if live_address is None:
                message = "NPU %s: no address_%s in hccn.conf and no live IP" % (device, device)
            else:
                message = "NPU %s: no address_%s in hccn.conf, live IP is %s" % (device, device, live_address)
        elif live_address is None:
            message = "NPU %s: hccn.conf address_%s=%s but the NPU has no live IP" % (device, device, conf_address)
        else:
            message = "NPU %s: hccn.conf address_%s=%s but the live IP is %s" % (
                device, device, conf_address, live_address)
        mismatches.append({"device": device, "conf_address": conf_address,
                           "live_address": live_address, "message": message})
    return mismatches
