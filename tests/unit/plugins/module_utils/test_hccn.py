# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for plugins/module_utils/_hccn.py over the recorded hccn_tool answers in fixtures/."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.ascend.kvpool.plugins.module_utils._hccn import (
    BUSY_MARKER,
    QUERIES,
    classify_error,
    compare_conf_with_live,
    is_busy,
    judge,
    normalize_net_health,
    parse_gateway,
    parse_hccn_conf,
    parse_ip,
    parse_link,
    parse_lldp,
    parse_net_health,
    parse_netdetect,
    parse_ping,
    parse_tls,
)

from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names
from ansible_collections.ascend.kvpool.tests.unit.plugins.module_utils.fixture_loader import fixture_names, read_answer

# --------------------------------------------------------------------------------------------------
# judge() over every recorded answer: (fixture, check, ok, state, message fragment, raw)

JUDGED = [
    ("hccn_link_up.txt", "link", True, "ok", "link is UP", "link status: UP"),
    ("hccn_link_down.txt", "link", False, "fail", "link is DOWN", "link status: DOWN"),
    ("hccn_net_health_success.txt", "net_health", True, "ok", "net health is Success", "net health status: Success"),
    ("hccn_net_health_socket_fail.txt", "net_health", False, "fail",
     "net health is Socket fail (only Success is healthy)", "net health status: Socket fail"),
    ("hccn_net_health_socket_failed.txt", "net_health", False, "fail",
     "net health is Socket fail (only Success is healthy)", "net health status: Socket failed"),
    ("hccn_net_health_receive_timeout.txt", "net_health", False, "fail", "net health is Receive timeout",
     "net health status: Receive timeout"),
    ("hccn_net_health_unreachable.txt", "net_health", False, "fail", "net health is Unreachable",
     "net health status: Unreachable"),
    ("hccn_net_health_time_exceeded.txt", "net_health", False, "fail", "net health is Time exceeded",
     "net health status: Time exceeded"),
    ("hccn_net_health_fault.txt", "net_health", False, "fail", "net health is Fault (only Success is healthy)",
     "net health status: Fault"),
    ("hccn_net_health_init.txt", "net_health", False, "transient",
     "net health Init: detection still starting, re-check in a few seconds", "net health status: Init"),
    ("hccn_net_health_thread_error.txt", "net_health", False, "fail", "net health is Thread error",
     "net health status: Thread error"),
    ("hccn_net_health_detect_ip_set.txt", "net_health", False, "transient",
     "net health Detect ip set: detection still starting", "net health status: Detect ip set"),
    ("hccn_net_health_unknown.txt", "net_health", False, "fail", "net health is Unknown",
     "net health status: Unknown"),
    ("hccn_ip_ok.txt", "ip", True, "ok", "IP 29.1.112.213 netmask 255.255.0.0", "ipaddr:29.1.112.213"),
    ("hccn_ip_none.txt", "ip", False, "fail", "no IP address configured",
     "Get ipconf failed, because no ip was preset there!"),
    ("hccn_ip_none_950.txt", "ip", False, "fail", "no IP address configured",
     "Get ip failed, because no ip was preset there!"),
    ("hccn_netdetect_addr.txt", "netdetect", True, "ok", "netdetect address 11.12.165.1",
     "netdetect addr: 11.12.165.1"),
    ("hccn_netdetect_address.txt", "netdetect", True, "ok", "netdetect address 11.12.165.1",
     "netdetect address: 11.12.165.1"),
    ("hccn_netdetect_unset.txt", "netdetect", False, "fail", "no netdetect address configured",
     "netdetect addr: 0.0.0.0"),
    ("hccn_gateway_ok.txt", "gateway", True, "ok", "default gateway 11.12.165.1 on eth0",
     "default gateway:11.12.165.1, Iface:eth0"),
    ("hccn_gateway_eth7.txt", "gateway", True, "ok", "default gateway 11.12.165.1 on eth7",
     "default gateway:11.12.165.1, Iface:eth7"),
    ("hccn_gateway_none.txt", "gateway", False, "fail", "no default gateway configured",
     "Get gateway failed, because no gateway was preset there!"),
    ("hccn_tls_ok.txt", "tls", True, "ok", "tls switch 0 (disabled)",
     "dev_id:0, tls switch[0](0:disable, 1:enable), tls preconfigured[1](0:non-preset, 1:preset), "
     "tls alarm time threshold[60]days"),
    ("hccn_tls_old.txt", "tls", True, "ok", "tls switch 0 (disabled)",
     "dev_id:0, tls switch[0](0:disable, 1:enable), tls alarm time threshold[60]days"),
    ("hccn_tls_device_prefix.txt", "tls", True, "ok", "tls switch 1 (enabled)",
     "device 0, tls switch[1](0:disable, 1:enable), tls preconfigured[0](0:non-preset, 1:preset), "
     "tls alarm time threshold[30]days"),
    ("hccn_tls_expired.txt", "tls", True, "ok", "tls switch 1 (enabled), a certificate has expired",
     "dev_id:3, tls switch[1](0:disable, 1:enable), tls preconfigured[0](0:non-preset, 1:preset), "
     "tls alarm time threshold[60]days"),
    ("hccn_tls_no_cert.txt", "tls", True, "ok", "no TLS certificate installed",
     "No certificate found, please set certs firstly!"),
    ("hccn_lldp_full.txt", "lldp", True, "ok", "LLDP neighbour port 400GE1/1/20:2", "Ifname: 400GE1/1/20:2"),
    ("hccn_lldp_grep_ifname.txt", "lldp", True, "ok", "LLDP neighbour port 400GE1/1/5:1", "Ifname: 400GE1/1/5:1"),
    ("hccn_ping_ok.txt", "ping", True, "ok", "ping 29.1.137.205: 3/3 received",
     "3 packets transmitted, 3 received, 0.00% packet loss"),
    ("hccn_ping_ok_guide.txt", "ping", True, "ok", "ping 11.12.165.80: 3/3 received",
     "3 packets transmitted, 3 received, 0.00% packet loss"),
    ("hccn_ping_partial.txt", "ping", False, "fail", "ping 29.1.137.205: 2/3 received (33.33% loss)",
     "3 packets transmitted, 2 received, 33.33% packet loss"),
    ("hccn_ping_fail.txt", "ping", False, "fail", "0/3 received (100% loss)", "Command execute failed!"),
    ("hccn_ping_link_down.txt", "ping", False, "fail", "Execute failed: Link status is down.",
     "Execute failed: Link status is down."),
    ("hccn_busy.txt", "link", False, "busy", "busy", "hccn_tool is busy, please try again."),
    ("hccn_lock_failed.txt", "net_health", False, "busy", "busy", "Get lock failed. Please try again."),
    ("hccn_invalid_device.txt", "link", False, "error", "invalid device id (driver not loaded or no such NPU)",
     "Get invalid device id."),
    ("hccn_device_not_exist.txt", "ip", False, "error", "invalid device id (driver not loaded or no such NPU)",
     "The device is not exist!"),
    ("hccn_permission_denied.txt", "lldp", False, "error", "hccn_tool failed (rc 12): permission denied",
     "permission denied: pls check this cmd run permission."),
]

# classify_error() of every recorded answer
CLASSIFIED = [
    ("hccn_link_up.txt", None),
    ("hccn_link_down.txt", None),
    ("hccn_net_health_fault.txt", None),
    ("hccn_ip_ok.txt", None),
    ("hccn_ip_none.txt", "no_ip"),
    ("hccn_ip_none_950.txt", "no_ip"),
    ("hccn_netdetect_addr.txt", None),
    ("hccn_netdetect_address.txt", None),
    ("hccn_netdetect_unset.txt", "no_netdetect"),
    ("hccn_gateway_ok.txt", None),
    ("hccn_gateway_none.txt", "no_gateway"),
    ("hccn_tls_ok.txt", None),
    ("hccn_tls_old.txt", None),
    ("hccn_tls_no_cert.txt", "no_certificate"),
    ("hccn_tls_device_prefix.txt", None),
    ("hccn_lldp_full.txt", None),
    ("hccn_ping_ok.txt", None),
    ("hccn_ping_partial.txt", None),
    ("hccn_ping_fail.txt", "command_failed"),
    ("hccn_ping_link_down.txt", "command_failed"),
    ("hccn_busy.txt", "busy"),
    ("hccn_lock_failed.txt", "busy"),
    ("hccn_invalid_device.txt", "invalid_device"),
    ("hccn_device_not_exist.txt", "invalid_device"),
    ("hccn_permission_denied.txt", "error"),
]

CONF_FIXTURES = ["hccn_conf_reference.txt", "hccn_conf_blog_0_7.txt", "hccn_conf_other_keys.txt"]


def _judge_fixture(name, check, transform=None):
    ans = read_answer(name)
    out, err = ans["stdout"], ans["stderr"]
    if transform is not None:
        out, err = transform(out), transform(err)
    return judge(check, ans["rc"], out, err)


def test_every_hccn_fixture_is_exercised():
    used = set(row[0] for row in JUDGED) | set(row[0] for row in CLASSIFIED) | set(CONF_FIXTURES)
    physical = ("hccn_optical_", "hccn_link_stat_", "hccn_stat_")  # test_hccn_phys.py exercises these
    assert set(n for n in fixture_names("hccn_") if not n.startswith(physical)) == used


def test_every_fixture_names_its_source():
    for name in fixture_names("hccn_"):
        assert read_answer(name)["sources"], name


def test_queries_are_the_seed_commands():
    assert QUERIES == (
        ("lldp", ("-lldp", "-g")),
        ("link", ("-link", "-g")),
        ("net_health", ("-net_health", "-g")),
        ("netdetect", ("-netdetect", "-g")),
        ("gateway", ("-gateway", "-g")),
        ("ip", ("-ip", "-g")),
        ("tls", ("-tls", "-g")),
    )


@pytest.mark.parametrize("name,check,ok,state,message,raw", JUDGED)
def test_judge_recorded(name, check, ok, state, message, raw):
    verdict = _judge_fixture(name, check)
    assert sorted(verdict) == ["check", "message", "ok", "raw", "state", "value"]
    assert verdict["check"] == check
    assert verdict["ok"] is ok
    assert verdict["state"] == state
    assert message in verdict["message"]
    assert verdict["raw"] == raw


def _crlf(text):
    return text.replace("\n", "\r\n")


def _trailing_blanks(text):
    return "\n".join(line + "  \t" if line else line for line in text.split("\n"))


def _leading_blank_lines(text):
    return "\n\n  \n" + text if text else text


def _no_final_newline(text):
    return text.rstrip("\n")


def _as_bytes(text):
    return text.encode("utf-8")


UGLY = [_crlf, _trailing_blanks, _leading_blank_lines, _no_final_newline, _as_bytes]


@pytest.mark.parametrize("transform", UGLY, ids=[t.__name__.strip("_") for t in UGLY])
@pytest.mark.parametrize("name,check,ok,state,message,raw", JUDGED, ids=[row[0] for row in JUDGED])
def test_judge_survives_ugly_text(name, check, ok, state, message, raw, transform):
    verdict = _judge_fixture(name, check, transform)
    assert verdict["ok"] is ok
    assert verdict["state"] == state
    assert message in verdict["message"]
    assert verdict["raw"] == raw


@pytest.mark.parametrize("name,expected", CLASSIFIED)
def test_classify_error_recorded(name, expected):
    ans = read_answer(name)
    assert classify_error(ans["rc"], ans["stdout"], ans["stderr"]) == expected


@pytest.mark.parametrize("rc,stdout,stderr,expected", [
    (0, "", "", None),
    (0, "", "something odd\n", "error"),
    (3, "", "", "error"),
    (None, "", "", "error"),
    (1, "", "Cmd execute failed!\n", "command_failed"),
    (11, "hccn_tool is busy, please try again.\n", "", "busy"),
    (11, "", "hccn_tool is busy, please try again.\n", "busy"),
    (31, "", "The device is occupied. Please try again later.\n", "busy"),
    (0, "link status: UP\n", "", None),
])
def test_classify_error_edges(rc, stdout, stderr, expected):
    assert classify_error(rc, stdout, stderr) == expected


def test_busy_marker_and_is_busy():
    assert BUSY_MARKER == "hccn_tool is busy"
    busy = read_answer("hccn_busy.txt")
    assert is_busy(busy["stdout"], busy["stderr"])
    assert is_busy("", "HCCN_TOOL IS BUSY, PLEASE TRY AGAIN.")
    assert is_busy(b"hccn_tool is busy, please try again.\r\n", None)
    assert not is_busy("link status: UP\n", "")
    assert not is_busy(None, None)


# --------------------------------------------------------------------------------------------------
# parsers


@pytest.mark.parametrize("text,status", [
    ("link status: UP\n", "UP"),
    ("link status: DOWN\n", "DOWN"),
    ("link status: up\n", "UP"),
    ("  LINK STATUS :   down  \r\n", "DOWN"),
    ("vnic link status: UP\n", None),
    ("link status: flapping\n", None),
    ("", None),
])
def test_parse_link(text, status):
    assert parse_link(text)["status"] == status


@pytest.mark.parametrize("text,status,transient", [
    ("net health status: Success\n", "Success", False),
    ("net health status: success\n", "Success", False),
    ("NET HEALTH STATUS: SUCCESS\n", "Success", False),
    ("net health status: Socket failed\n", "Socket fail", False),
    ("net health status: socket  fail\n", "Socket fail", False),
    ("net health status: detect IP set\n", "Detect ip set", True),
    ("net health status: INIT\r\n", "Init", True),
    ("net health status: Something new\n", "Something new", False),
    ("net health status:\n", None, False),
    ("", None, False),
])
def test_parse_net_health(text, status, transient):
    value = parse_net_health(text)
    assert value["status"] == status
    assert value["transient"] is transient


def test_parse_net_health_keeps_raw_spelling():
    value = parse_net_health(read_answer("hccn_net_health_socket_failed.txt")["stdout"])
    assert value["status"] == "Socket fail"
    assert value["raw_status"] == "Socket failed"
    assert value["known"] is True
    assert normalize_net_health(None) is None


def test_parse_ip():
    assert parse_ip(read_answer("hccn_ip_ok.txt")["stdout"]) == {"ipaddr": "29.1.112.213", "netmask": "255.255.0.0"}
    assert parse_ip("") == {"ipaddr": None, "netmask": None}
    assert parse_ip("IPADDR : 10.0.0.1\r\nNETMASK : 255.255.255.0\r\n") == {
        "ipaddr": "10.0.0.1", "netmask": "255.255.255.0"}
    assert parse_ip("vnic ipaddr: 192.168.1.199\nvnic netmask: 255.255.255.0\n")["ipaddr"] is None


def test_judge_ip_without_netmask_fails():
    verdict = judge("ip", 0, "ipaddr:29.1.112.213\n", "")
    assert verdict["ok"] is False and verdict["state"] == "fail"
    assert "no netmask" in verdict["message"]


def test_parse_netdetect_variants():
    assert parse_netdetect(read_answer("hccn_netdetect_addr.txt")["stdout"])["address"] == "11.12.165.1"
    assert parse_netdetect(read_answer("hccn_netdetect_address.txt")["stdout"])["address"] == "11.12.165.1"
    unset = parse_netdetect(read_answer("hccn_netdetect_unset.txt")["stdout"])
    assert unset["address"] is None and unset["unset"] is True and unset["raw_address"] == "0.0.0.0"
    assert parse_netdetect("")["address"] is None


def test_parse_gateway():
    assert parse_gateway(read_answer("hccn_gateway_ok.txt")["stdout"]) == {"address": "11.12.165.1", "iface": "eth0"}
    assert parse_gateway("default gateway:11.12.165.1\n") == {"address": "11.12.165.1", "iface": None}
    assert parse_gateway("Default Gateway : 10.0.0.1 , IFACE : eth3\r\n") == {"address": "10.0.0.1", "iface": "eth3"}
    assert parse_gateway("")["address"] is None


def test_parse_tls_full():
    value = parse_tls(read_answer("hccn_tls_ok.txt")["stdout"])
    assert value["switch"] == 0
    assert value["preconfigured"] == 1
    assert value["alarm_days"] == 60
    assert value["dev_id"] == 0
    assert value["certificate"] is True
    assert [c["type"] for c in value["certs"]] == ["pub cert", "ca1 cert"]
    assert value["certs"][0]["issuer"] == "/C=CN/O=Huawei/CN=Huawei Equipment CA"
    assert value["certs"][0]["end_time"] == "Sat Mar 12 08:00:00 2044 GMT"
    assert value["expiration_status"] == 0


def test_parse_tls_older_driver_omits_preconfigured():
    value = parse_tls(read_answer("hccn_tls_old.txt")["stdout"])
    assert value["switch"] == 0
    assert value["preconfigured"] is None
    assert value["alarm_days"] == 60
    assert value["certificate"] is True
    assert value["certs"][0]["subject"] is None


def test_parse_tls_device_prefix_and_no_cert():
    value = parse_tls(read_answer("hccn_tls_device_prefix.txt")["stdout"])
    assert (value["dev_id"], value["switch"], value["preconfigured"], value["alarm_days"]) == (0, 1, 0, 30)
    no_cert = read_answer("hccn_tls_no_cert.txt")
    value = parse_tls(no_cert["stdout"] + no_cert["stderr"])
    assert value["switch"] is None and value["certificate"] is False
    assert parse_tls("")["certificate"] is None


def test_parse_tls_expired_status_from_stderr():
    ans = read_answer("hccn_tls_expired.txt")
    assert parse_tls(ans["stdout"])["expiration_status"] is None
    value = judge("tls", ans["rc"], ans["stdout"], ans["stderr"])["value"]
    assert value["expiration_status"] == 2
    assert value["certs"][0]["expiration_status"] == 2


def test_parse_lldp_reference_sample():
    value = parse_lldp(read_answer("hccn_lldp_full.txt")["stdout"])
    assert value["port_ifname"] == "400GE1/1/20:2"
    assert value["chassis_mac"] == "..."
    assert value["mgmt_ipv4"] == "26.xx.xx.xx"
    assert value["max_frame_size"] == 9216
    assert value["system_description"].split("\n") == [
        "Versatile Routing Platform Software",
        "VRP (R) software, Version 8.211 (DX511 V200R021C10SPC600)",
        "Huarong DX511",
    ]
    assert value["tlvs"] == ["chassis id", "port id", "system description", "system capabilities",
                             "management address", "maximum frame size", "end of lldpdu"]


def test_parse_lldp_other_port_subtype_and_extra_tlvs():
    text = ("Chassis ID TLV\n\tMAC: 00:11:22:33:44:55\nPort ID TLV\n\tMAC: 00:11:22:33:44:66\n"
            "Time to Live TLV\n\t121\nPort Description TLV\n\t100GE1/0/1\nSystem Name TLV\n\tleaf-01\n"
            "End of LLDPDU TLV\n")
    value = parse_lldp(text)
    assert value["port_ifname"] is None
    assert value["port_id"] == "00:11:22:33:44:66"
    assert (value["ttl"], value["port_description"], value["system_name"]) == (121, "100GE1/0/1", "leaf-01")
    verdict = judge("lldp", 0, text, "")
    assert verdict["ok"] is False and verdict["state"] == "fail"
    assert "no Ifname" in verdict["message"]


def test_judge_lldp_empty_answer_is_a_finding_not_an_error():
    verdict = judge("lldp", 0, "", "")
    assert verdict["ok"] is False and verdict["state"] == "fail"
    assert "no LLDP neighbour" in verdict["message"]


# --------------------------------------------------------------------------------------------------
# ping


def _ping(name):
    ans = read_answer(name)
    return parse_ping(ans["rc"], ans["stdout"], ans["stderr"])


def test_parse_ping_success():
    value = _ping("hccn_ping_ok.txt")
    assert (value["device"], value["target"]) == (3, "29.1.137.205")
    assert (value["transmitted"], value["received"], value["loss_pct"]) == (3, 3, 0.0)
    assert value["rtt_ms"] == [1.418, 0.034, 0.04]
    assert value["rtt_avg_ms"] == pytest.approx(0.497333, abs=1e-6)
    assert value["timeouts"] == []
    assert value["ok"] is True and value["error"] is None


def test_parse_ping_partial_loss():
    value = _ping("hccn_ping_partial.txt")
    assert (value["transmitted"], value["received"], value["loss_pct"]) == (3, 2, 33.33)
    assert value["timeouts"] == [0]
    assert value["rtt_ms"] == [0.097, 0.066]
    assert value["ok"] is False
    assert value["error"] == "recv time out seq=0"


def test_parse_ping_total_failure():
    value = _ping("hccn_ping_fail.txt")
    assert (value["transmitted"], value["received"], value["loss_pct"]) == (3, 0, 100.0)
    assert value["ok"] is False
    assert value["error"] == "Command execute failed!"
    assert value["rtt_avg_ms"] is None


def test_parse_ping_link_down():
    value = _ping("hccn_ping_link_down.txt")
    assert (value["transmitted"], value["received"]) == (3, 0)
    assert value["error"] == "Execute failed: Link status is down."


@pytest.mark.parametrize("stdout", [
    "device 0 PING 10.0.0.2\nrecv seq=0,time=0.1ms\nDestination Host Unreachable\n"
    "3 packets transmitted, 3 received, 0.00% packet loss\n",
    "device 0 PING 10.0.0.2\nping: sendmsg: Message too long\n3 packets transmitted, 3 received, 0.00% packet loss\n",
    "device 0 PING 10.0.0.2\nrecv time out seq=1\n3 packets transmitted, 3 received, 0.00% packet loss\n",
])
def test_parse_ping_failure_markers_override_counts(stdout):
    assert parse_ping(0, stdout, "")["ok"] is False


def test_parse_ping_without_summary_counts_lines():
    stdout = "device 1 PING 10.0.0.2\nrecv seq:0,time:0.080000ms\nrecv time out seq:1\npkt send fail seq:2\n"
    value = parse_ping(1, stdout, "")
    assert (value["transmitted"], value["received"]) == (3, 1)
    assert value["timeouts"] == [1] and value["send_failures"] == [2]
    assert value["loss_pct"] == pytest.approx(66.67)
    assert value["ok"] is False


def test_parse_ping_busy_and_empty():
    busy = parse_ping(11, "hccn_tool is busy, please try again.\n", "")
    assert busy["ok"] is False and busy["transmitted"] is None and "busy" in busy["error"]
    empty = parse_ping(0, "", "")
    assert empty["ok"] is False and empty["transmitted"] is None and empty["error"] == "no answer (rc 0)"
    verdict = judge("ping", 11, "hccn_tool is busy, please try again.\n", "")
    assert verdict["state"] == "busy"
    verdict = judge("ping", 0, "", "")
    assert verdict["state"] == "error" and verdict["ok"] is False


# --------------------------------------------------------------------------------------------------
# judge edges


@pytest.mark.parametrize("check", [name for name, _argv in QUERIES if name != "lldp"])
def test_judge_empty_output_is_not_understood(check):
    verdict = judge(check, 0, "", "")
    assert verdict["ok"] is False
    assert verdict["state"] == "error"
    assert "output not understood" in verdict["message"]
    assert verdict["raw"] == ""


@pytest.mark.parametrize("check", [name for name, _argv in QUERIES])
def test_judge_garbage_is_not_understood(check):
    verdict = judge(check, 0, "\n  Segmentation fault (core dumped)  \nmore\n", "")
    assert verdict["ok"] is False
    assert verdict["state"] == "error"
    assert "output not understood" in verdict["message"]
    assert verdict["raw"] == "Segmentation fault (core dumped)"


@pytest.mark.parametrize("check", [name for name, _argv in QUERIES])
def test_judge_invalid_device_for_every_check(check):
    ans = read_answer("hccn_invalid_device.txt")
    verdict = judge(check, ans["rc"], ans["stdout"], ans["stderr"])
    assert verdict["state"] == "error"
    assert_names(verdict["message"], "invalid device id", "driver not loaded", "no such NPU")


def test_judge_text_wins_over_exit_code():
    verdict = judge("link", 1, "link status: UP\n", "")
    assert verdict["ok"] is True and verdict["state"] == "ok"
    verdict = judge("link", 0, "link status: DOWN\n", "")
    assert verdict["ok"] is False and verdict["state"] == "fail"


def test_judge_lowercase_values():
    assert judge("link", 0, "link status: up\n", "")["ok"] is True
    verdict = judge("net_health", 0, "net health status: socket failed\n", "")
    assert verdict["value"]["status"] == "Socket fail"
    assert_names(verdict["message"], "net health", "Socket fail", "only Success is healthy")
    assert judge("net_health", 0, "net health status: init\n", "")["state"] == "transient"


def test_judge_unexpected_error_class_for_check():
    ans = read_answer("hccn_gateway_none.txt")
    verdict = judge("ip", ans["rc"], ans["stdout"], ans["stderr"])
    assert verdict["state"] == "error"
    assert "unexpected for the ip check" in verdict["message"]


def test_judge_unknown_check_is_a_programming_error():
    with pytest.raises(ValueError):
        judge("nope", 0, "link status: UP\n", "")


# --------------------------------------------------------------------------------------------------
# /etc/hccn.conf


def test_parse_hccn_conf_reference():
    parsed = parse_hccn_conf(read_answer("hccn_conf_reference.txt")["file"])
    assert parsed == {
        "devices": {0: {"address": "29.1.137.205", "netmask": "255.255.0.0", "netdetect": "29.1.0.1",
                        "gateway": "29.1.0.1", "send_arp_status": "1"}},
        "other": {},
        "errors": [],
        "warnings": [],
    }


def test_parse_hccn_conf_two_devices():
    parsed = parse_hccn_conf(read_answer("hccn_conf_blog_0_7.txt")["file"])
    assert sorted(parsed["devices"]) == [0, 7]
    assert parsed["devices"][7]["address"] == "29.1.170.143"
    assert parsed["errors"] == [] and parsed["warnings"] == []


def test_parse_hccn_conf_other_keys_and_comments():
    parsed = parse_hccn_conf(read_answer("hccn_conf_other_keys.txt")["file"])
    assert parsed["devices"][0]["tls_enable"] == "0"
    assert parsed["devices"][0]["mtu"] == "9000"
    assert parsed["devices"][0]["dscp_tc"] == "48:3,"
    assert parsed["devices"][1] == {"bond_address": "10.20.12.11", "bond_netmask": "255.255.255.0"}
    assert parsed["devices"][2] == {"udhcpc_enable": "1"}
    assert parsed["errors"] == [] and parsed["other"] == {}


def test_parse_hccn_conf_ugly():
    text = ("\r\n# comment\r\n  \r\naddress_0 = 10.0.0.1  \r\naddress_0=10.0.0.9\r\naddress_12=10.0.0.12\r\n"
            "not a setting\r\n=novalue\r\nglobal_flag=on\r\naddress_3=\r\n")
    parsed = parse_hccn_conf(text)
    assert parsed["devices"][0] == {"address": "10.0.0.1"}
    assert parsed["devices"][12] == {"address": "10.0.0.12"}
    assert parsed["devices"][3] == {"address": ""}
    assert parsed["other"] == {"global_flag": "on"}
    assert parsed["errors"] == ["not a setting", "=novalue"]
    warnings = " | ".join(parsed["warnings"])
    assert "CRLF" in warnings
    assert "blanks around 'address_0'" in warnings
    assert_names(warnings, "duplicate address_0=10.0.0.9", "ignored", "first value 10.0.0.1")


@pytest.mark.parametrize("text", ["", None, b"address_0=1.2.3.4\n"])
def test_parse_hccn_conf_empty_and_bytes(text):
    parsed = parse_hccn_conf(text)
    assert parsed["errors"] == []
    if text:
        assert parsed["devices"] == {0: {"address": "1.2.3.4"}}
    else:
        assert parsed["devices"] == {}


def test_compare_conf_with_live_all_match():
    conf = parse_hccn_conf(read_answer("hccn_conf_blog_0_7.txt")["file"])["devices"]
    assert compare_conf_with_live(conf, {0: "29.1.137.205", 7: "29.1.170.143"}) == []


def test_compare_conf_with_live_mismatches():
    conf = {0: {"address": "29.1.1.80"}, 1: {"address": "29.1.1.81"}, 2: {"netmask": "255.255.255.0"},
            3: {"address": "29.1.1.83"}}
    live = {0: "29.1.1.80", 1: "29.1.1.99", 2: "29.1.1.82", 3: None, 4: "29.1.1.84"}
    result = compare_conf_with_live(conf, live)
    assert [r["device"] for r in result] == [1, 2, 3, 4]
    by_dev = dict((r["device"], r) for r in result)
    assert by_dev[1]["conf_address"] == "29.1.1.81" and by_dev[1]["live_address"] == "29.1.1.99"
    assert_names(by_dev[1]["message"], "NPU 1", "address_1=29.1.1.81", "live IP is 29.1.1.99")
    assert by_dev[2]["conf_address"] is None and "no address_2 in hccn.conf" in by_dev[2]["message"]
    assert by_dev[3]["live_address"] is None and "has no live IP" in by_dev[3]["message"]
    assert by_dev[4]["conf_address"] is None and by_dev[4]["live_address"] == "29.1.1.84"
    for row in result:
        assert sorted(row) == ["conf_address", "device", "live_address", "message"]


def test_compare_conf_with_live_string_keys_and_blanks():
    result = compare_conf_with_live({"0": {"address": " 10.0.0.1 "}}, {"0": "10.0.0.1", 1: None})
    assert [r["device"] for r in result] == [1]
    assert_names(result[0]["message"], "NPU 1", "no address_1 in hccn.conf", "no live IP")
    assert compare_conf_with_live({}, {}) == []
    assert compare_conf_with_live(None, None) == []


def test_parse_ping_prefers_the_failure_line_over_a_generic_error():
    stdout = read_answer("hccn_ping_partial.txt")["stdout"]
    value = parse_ping(1, stdout, "Cmd execute failed!\n")
    assert value["error"] == "recv time out seq=0"
    verdict = judge("ping", 1, stdout, "Cmd execute failed!\n")
    assert_names(verdict["message"], "ping 29.1.137.205", "2/3 received", "33.33% loss", "recv time out seq=0")
    assert verdict["raw"] == "3 packets transmitted, 2 received, 33.33% packet loss"
