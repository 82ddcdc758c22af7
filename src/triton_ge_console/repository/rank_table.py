"""The HCCL rank table of an `npu_ge` model spanning several NPUs, and the checks `validate` applies to one.

CANN's GE takes the NPUs that run collective operators together from a rank table file (GE option
`ge.exec.rankTableFile`, "the cluster taking part in collective communication"; each process then names its
own `ge.exec.rankId` and `ge.exec.deviceId`). For one server the file is HCCL's version 1.0 layout:
`status` "completed", `version` "1.0", `server_count`, and a `server_list` whose `device` entries carry the
NPU's physical `device_id` and a `rank_id` counted from 0; `device_ip` (the NPU's NIC address) is required
only when several servers take part. Sources: CANN GE options reference (ge.exec.rankTableFile,
ge.exec.rankId, ge.exec.deviceId) and HCCL's "rank table配置资源信息" pages (Atlas A2, version 1.0).
"""

from __future__ import annotations

import json
from typing import Any

FILENAME = "rank_table.json"
OPTION = "ge.exec.rankTableFile"
VERSION = "1.0"


def rank_table(device_ids: tuple[int, ...]) -> dict[str, Any]:
    """One server's rank table: every NPU of the model, rank ids 0.. in device_ids order."""
    devices = [{"device_id": str(device), "rank_id": str(rank)} for rank, device in enumerate(device_ids)]
    return {"status": "completed", "version": VERSION, "server_count": "1",
            "server_list": [{"server_id": "node_0", "device": devices}]}


def rank_table_bytes(device_ids: tuple[int, ...]) -> bytes:
    """The file's bytes (stable: the same NPUs always give the same bytes)."""
    return (json.dumps(rank_table(device_ids), indent=2) + "\n").encode("utf-8")


def rank_table_problems(text: str, device_ids: tuple[int, ...] | None) -> list[str]:
    """What HCCL would refuse in a rank table, and NPUs of device_ids it does not list; [] when fine."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        return [f"is not JSON: {exc}"]
    if not isinstance(data, dict):
        return ["is not a JSON object"]
    problems = _top_level_problems(data)
    if problems:
        return problems
    devices = [d for server in data["server_list"] for d in server.get("device", []) if isinstance(d, dict)]
    problems += _device_problems(devices, multi_server=len(data["server_list"]) > 1)
    listed = {int(d["device_id"]) for d in devices if str(d.get("device_id", "")).isdigit()}
    missing = sorted(set(device_ids or ()) - listed)
    if missing and len(data["server_list"]) == 1:
        problems.append(f"lists no device_id {missing[0]} (device_ids {list(device_ids or ())})")
    return problems


def _top_level_problems(data: dict[str, Any]) -> list[str]:
    """status, version, server_count and server_list as HCCL requires them."""
    problems = []
    if data.get("status") != "completed":
        problems.append(f"status '{data.get('status')}' is not 'completed' (HCCL does not use it)")
    servers = data.get("server_list")
    if not isinstance(servers, list) or not servers:
        return [*problems, "has no server_list"]
    if str(data.get("server_count")) != str(len(servers)):
        problems.append(f"server_count '{data.get('server_count')}' but server_list has {len(servers)}")
    return problems


def _device_problems(devices: list[dict[str, Any]], multi_server: bool) -> list[str]:
    """Integer device_id and rank_id on every device, rank ids 0..n-1 once each, device_ip across servers."""
    problems = []
    for device in devices:
        for key in ("device_id", "rank_id"):
            if not str(device.get(key, "")).isdigit():
                problems.append(f"a device has {key} '{device.get(key)}': expected an integer string")
        if multi_server and not device.get("device_ip"):
            problems.append(f"device {device.get('device_id')} has no device_ip (required across servers)")
    ranks = sorted(int(d["rank_id"]) for d in devices if str(d.get("rank_id", "")).isdigit())
    if ranks and ranks != list(range(len(devices))):
        problems.append(f"rank_ids {ranks} are not 0..{len(devices) - 1}, each once")
    return problems
