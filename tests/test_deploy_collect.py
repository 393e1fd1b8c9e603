"""The per-broker collector's deployment files, checked without a cluster: the Kubernetes sidecar
example (deploy/k8s/replmon-collect.yaml) against the Kubernetes API schemas and replmon's real
command line, and the systemd units (deploy/systemd) with `systemd-analyze verify` and the same
command line."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from replmon.streaming.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
K8S = ROOT / "deploy" / "k8s" / "replmon-collect.yaml"
SYSTEMD = ROOT / "deploy" / "systemd"
K8S_VERSION = "1.30"


def parse_replmon(command: list[str]):
    assert command[0] == "replmon", command
    return build_parser().parse_args(command[1:])  # exits (fails the test) on a wrong option


def expand(command: list[str], env: dict[str, str]) -> list[str]:
    """Kubernetes' $(VAR) expansion of a container's command."""
    return [re.sub(r"\$\((\w+)\)", lambda m: env[m[1]], arg) for arg in command]


# ------------------------------------------------------------------------------ k8s


@pytest.fixture(scope="module")
def objects() -> list[dict]:
    return [d for d in yaml.safe_load_all(K8S.read_text()) if d]


def _one(objects, kind, name=None):
    (obj,) = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    return obj


def _containers(obj) -> dict:
    return {c["name"]: c for c in obj["spec"]["template"]["spec"]["containers"]}


def test_every_object_is_valid_against_the_api_schema(objects):
    assert {o["kind"] for o in objects} >= {"Namespace", "ConfigMap", "Service", "StatefulSet", "Deployment"}
    for obj in objects:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    broken = yaml.safe_load(yaml.safe_dump(_one(objects, "StatefulSet")))
    broken["spec"]["template"]["spec"]["containers"][1]["volumeMount"] = []  # misspelt
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


def test_the_sidecar_reads_its_own_brokers_request_log_from_the_shared_volume(objects):
    pod = _one(objects, "StatefulSet")["spec"]["template"]["spec"]
    kafka, sidecar = (
        _containers(_one(objects, "StatefulSet"))["kafka"],
        _containers(_one(objects, "StatefulSet"))["replmon-collect"],
    )
    kafka_env = {e["name"]: e for e in kafka["env"]}
    sidecar_env = {e["name"]: e for e in sidecar["env"]}
    # One ordinal for both: the broker's node.id is the pod index the sidecar names its log by.
    assert kafka_env["KAFKA_NODE_ID"]["value"] == "$(POD_INDEX)"
    assert kafka_env["POD_INDEX"]["valueFrom"] == sidecar_env["POD_INDEX"]["valueFrom"]
    args = parse_replmon(expand(sidecar["command"], {"POD_INDEX": "2"}))
    assert args.command == "collect" and args.role == "broker"
    (spec,) = args.request_log
    broker, _, path = spec.partition("=")
    assert broker == "2"
    # The broker writes kafka-request.log into LOG_DIR (kafka.logs.dir); the sidecar reads it
    # there through the same volume, and keeps its checkpoint on it.
    log_dir = kafka_env["LOG_DIR"]["value"]
    assert path == f"{log_dir}/kafka-request.log"
    kafka_mounts = {m["mountPath"]: m["name"] for m in kafka["volumeMounts"]}
    sidecar_mounts = {m["mountPath"]: m["name"] for m in sidecar["volumeMounts"]}
    assert kafka_mounts[log_dir] == sidecar_mounts[log_dir]
    assert args.state_dir.startswith(log_dir + "/")
    assert kafka_mounts[log_dir] in {v["name"] for v in pod["volumes"] if "emptyDir" in v}


def test_the_brokers_log4j2_configuration_is_the_shipped_request_log_appender(objects):
    kafka = _containers(_one(objects, "StatefulSet"))["kafka"]
    opts = {e["name"]: e.get("value") for e in kafka["env"]}["KAFKA_LOG4J_OPTS"]
    path = Path(opts.removeprefix("-Dlog4j2.configurationFile="))
    mounts = {m["mountPath"]: m["name"] for m in kafka["volumeMounts"]}
    volume = {v["name"]: v for v in _one(objects, "StatefulSet")["spec"]["template"]["spec"]["volumes"]}[
        mounts[str(path.parent)]
    ]
    config = _one(objects, "ConfigMap", volume["configMap"]["name"])["data"][path.name]
    shipped = (ROOT / "deploy" / "kafka" / "log4j2-request-log.properties").read_text()
    wanted = [x for x in shipped.splitlines() if x.strip() and not x.startswith("#")]
    have = [x.strip() for x in config.splitlines()]
    assert all(line in have for line in wanted), set(wanted) - set(have)


def test_exactly_one_cluster_role_for_the_cluster(objects):
    deployment = _one(objects, "Deployment", "replmon-collect-cluster")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"]["type"] == "Recreate", "never two at once in a rollout"
    (container,) = _containers(deployment).values()
    cluster = parse_replmon(container["command"])
    assert cluster.role == "cluster" and cluster.request_log == []
    broker = parse_replmon(
        expand(_containers(_one(objects, "StatefulSet"))["replmon-collect"]["command"], {"POD_INDEX": "0"})
    )
    # Both publish about the same cluster to the same metrics topic.
    for flag in ("cluster", "bootstrap", "metrics_bootstrap", "metrics_topic"):
        assert getattr(cluster, flag) == getattr(broker, flag), flag
    service = _one(objects, "Service", "kafka")
    assert cluster.bootstrap.startswith(f"{service['metadata']['name']}.{service['metadata']['namespace']}.")


# --------------------------------------------------------------------------- systemd


def unit_exec_start(path: Path, instance: str) -> list[str]:
    """ExecStart of a unit as systemd runs it: continuation lines joined, %i and ${VAR} of the
    shipped environment file (deploy/systemd/collect.env) substituted."""
    text = path.read_text().replace("\\\n", " ")
    (line,) = [x for x in text.splitlines() if x.startswith("ExecStart=")]
    env = dict(
        x.split("=", 1)
        for x in (SYSTEMD / "collect.env").read_text().splitlines()
        if x and not x.startswith("#")
    )
    env["STATE_DIRECTORY"] = "/var/lib/replmon-collect"
    assert all(not k.startswith("REPLMON_") for k in env), "REPLMON_* are replmon's strict settings"
    line = line.removeprefix("ExecStart=").replace("%i", instance)
    line = re.sub(r"\$\{(\w+)\}", lambda m: env[m[1]], line)
    argv = shlex.split(line)
    assert Path(argv[0]).name == "replmon", argv
    return ["replmon", *argv[1:]]


def test_the_systemd_units_run_the_real_cli():
    broker = parse_replmon(unit_exec_start(SYSTEMD / "replmon-collect@.service", "3"))
    assert broker.role == "broker" and broker.request_log == ["3=/var/log/kafka/kafka-request.log"]
    cluster = parse_replmon(unit_exec_start(SYSTEMD / "replmon-collect-cluster.service", ""))
    assert cluster.role == "cluster" and cluster.request_log == []
    for unit in ("replmon-collect@.service", "replmon-collect-cluster.service"):
        text = (SYSTEMD / unit).read_text()
        # A fenced collector (exit 4) stays down: restarting it would fence the one that took over.
        assert re.search(r"^RestartPreventExitStatus=.*\b4\b", text, re.M), unit


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze is not installed")
def test_systemd_analyze_verifies_the_units(tmp_path):
    # The units point at /opt/replmon; verify checks that the executable exists, so point it at this one.
    replmon = Path(sys.executable).parent / "replmon"
    assert replmon.is_file()
    for unit in ("replmon-collect@.service", "replmon-collect-cluster.service"):
        text = (SYSTEMD / unit).read_text().replace("/opt/replmon/bin/replmon", str(replmon))
        (tmp_path / unit).write_text(text)
    proc = subprocess.run(
        [
            "systemd-analyze",
            "verify",
            str(tmp_path / "replmon-collect@3.service"),
            str(tmp_path / "replmon-collect-cluster.service"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0 and not proc.stderr.strip(), proc.stderr
    # It does catch a wrong unit: a misspelt directive.
    (tmp_path / "replmon-collect-cluster.service").write_text(
        (tmp_path / "replmon-collect-cluster.service").read_text().replace("RestartSec=", "RestartSecs=")
    )
    proc = subprocess.run(
        ["systemd-analyze", "verify", str(tmp_path / "replmon-collect-cluster.service")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "RestartSecs" in proc.stderr, proc.stderr
