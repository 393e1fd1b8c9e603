"""The deployment files, checked without a container engine or a cluster: the full-stack compose
file (deploy/compose, which includes deploy/grafana's) and the Spark-on-Kubernetes manifests
(deploy/k8s), against the Kubernetes API schemas (kubernetes-validate), the files they mount,
replmon's real command line and its real settings."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

import kubernetes_validate
import pytest
import yaml

from replmon.streaming.cli import build_parser
from replmon.streaming.settings import load_settings

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "deploy" / "compose" / "docker-compose.yml"
K8S = ROOT / "deploy" / "k8s" / "replmon.yaml"
K8S_VERSION = "1.30"


# --------------------------------------------------------------------------- compose


def load_compose(path: Path) -> dict[str, tuple[dict, Path]]:
    """Services by name, each with the folder its relative paths are resolved against
    (an included file keeps its own folder, as Compose does)."""
    doc = yaml.safe_load(path.read_text())
    services = {name: (svc, path.parent) for name, svc in doc.get("services", {}).items()}
    for inc in doc.get("include", []):
        inc_path = (path.parent / (inc if isinstance(inc, str) else inc["path"])).resolve()
        assert inc_path.is_file(), f"included compose file {inc_path} is missing"
        included = load_compose(inc_path)
        assert not set(included) & set(services), "a service is defined twice"
        services.update(included)
    return services


def named_volumes(path: Path) -> set[str]:
    doc = yaml.safe_load(path.read_text())
    names = set(doc.get("volumes") or {})
    for inc in doc.get("include", []):
        names |= named_volumes(path.parent / (inc if isinstance(inc, str) else inc["path"]))
    return names


def parse_replmon(command: list[str]):
    assert command[0] == "replmon", command
    return build_parser().parse_args(command[1:])  # exits (fails the test) on a wrong option


@pytest.fixture(scope="module")
def services():
    return load_compose(COMPOSE)


def test_the_stack_has_kafka_redis_grafana_and_replmon_on_pinned_images(services):
    assert {"kafka", "redis", "grafana", "replmon"} <= set(services)
    for name, (svc, _) in services.items():
        image = svc.get("image")
        assert image or "build" in svc, f"{name}: neither image nor build"
        if image:
            assert ":" in image and not image.endswith(":latest"), f"{name}: pin the image tag"


def test_published_ports_are_loopback_only(services):
    for name, (svc, _) in services.items():
        for port in svc.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback"


def test_mounted_files_exist_and_named_volumes_are_declared(services):
    declared = named_volumes(COMPOSE)
    for name, (svc, folder) in services.items():
        for volume in svc.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith((".", "/")):
                assert (folder / source).exists(), f"{name} mounts {source}, which is missing"
            else:
                assert source in declared, f"{name} uses volume {source}, not declared"
        build = svc.get("build")
        if build:
            context = folder / build["context"]
            assert (context / build["dockerfile"]).is_file(), f"{name}: no Dockerfile"


def test_grafana_is_provisioned_with_the_redis_source_and_replmon_dashboards(services):
    svc, folder = services["grafana"]
    mounts = dict(v.split(":")[:2][::-1] for v in svc["volumes"])  # target -> source
    provisioning = folder / mounts["/etc/grafana/provisioning"]
    sources = [yaml.safe_load(f.read_text()) for f in (provisioning / "datasources").glob("*.yaml")]
    assert any(ds["type"] == "redis-datasource" for doc in sources for ds in doc["datasources"])
    providers = [yaml.safe_load(f.read_text()) for f in (provisioning / "dashboards").glob("*.yaml")]
    paths = {p["options"]["path"] for doc in providers for p in doc["providers"]}
    assert paths and paths <= set(mounts), "dashboards are read from a folder that is mounted"
    for path in paths:
        assert list((folder / mounts[path]).glob("*.json")), f"no dashboards in {mounts[path]}"


def test_replmon_reads_the_stacks_kafka_and_writes_its_redis(services):
    svc, _ = services["replmon"]
    args = parse_replmon(svc["command"])
    assert args.command == "run" and not args.demo and not args.once
    kafka_env = services["kafka"][0]["environment"]
    advertised = dict(re.findall(r"(\w+)://([^,]+)", kafka_env["KAFKA_ADVERTISED_LISTENERS"]))
    assert args.metrics_bootstrap == advertised[kafka_env["KAFKA_INTER_BROKER_LISTENER_NAME"]]
    assert urlsplit(args.redis_url).hostname in services
    for dep in svc["depends_on"]:
        assert dep in services
    # The environment is replmon settings: a misspelt REPLMON_ key would be refused.
    env = {k.removeprefix("REPLMON_").lower(): v for k, v in svc.get("environment", {}).items()}
    assert env and all(k.startswith("spark__") for k in env)
    sim = parse_replmon(services["simulator"][0]["command"])
    assert sim.to == "kafka" and sim.metrics_bootstrap == args.metrics_bootstrap


# ------------------------------------------------------------------------------ k8s


@pytest.fixture(scope="module")
def k8s_objects() -> list[dict]:
    return [d for d in yaml.safe_load_all(K8S.read_text()) if d]


def _one(objects, kind, name=None):
    (obj,) = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    return obj


def test_every_k8s_object_is_valid_against_the_api_schema(k8s_objects):
    assert {o["kind"] for o in k8s_objects} >= {
        "Namespace",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "PersistentVolumeClaim",
        "ConfigMap",
        "Service",
        "Deployment",
    }
    for obj in k8s_objects:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def test_a_wrong_field_is_caught_by_the_schema_check(k8s_objects):
    broken = yaml.safe_load(yaml.safe_dump(_one(k8s_objects, "Deployment")))
    broken["spec"]["template"]["spec"]["containers"][0]["volumeMount"] = []  # misspelt
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


def test_the_driver_runs_the_real_cli_with_real_settings(k8s_objects, tmp_path):
    config = _one(k8s_objects, "ConfigMap")["data"]
    deployment = _one(k8s_objects, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = parse_replmon(container["command"])
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    config_dir = Path(args.config).parent
    assert str(config_dir) == mounts["config"]
    (tmp_path / Path(args.config).name).write_text(config[Path(args.config).name])
    settings = load_settings(str(tmp_path / Path(args.config).name))  # strict: a typo fails
    assert settings.spark.master.startswith("k8s://")
    assert settings.kafka.bootstrap_servers and settings.redis.url
    assert settings.spark.checkpoint_dir.startswith(mounts["checkpoint"] + "/")
    conf = settings.spark.conf
    assert conf["spark.kubernetes.authenticate.driver.serviceAccountName"] == pod["serviceAccountName"]
    service = _one(k8s_objects, "Service", "replmon-driver")
    assert conf["spark.driver.host"].startswith(
        f"{service['metadata']['name']}.{service['metadata']['namespace']}."
    )
    assert {str(p["port"]) for p in service["spec"]["ports"]} == {
        conf["spark.driver.port"],
        conf["spark.driver.blockManager.port"],
    }
    assert service["spec"]["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    assert conf["spark.kubernetes.container.image"] == container["image"]


def test_executors_mount_the_same_checkpoint_volume_as_the_driver(k8s_objects):
    config = _one(k8s_objects, "ConfigMap")["data"]
    template_path = Path(
        load_settings_from_text(config["replmon.toml"]).spark.conf[
            "spark.kubernetes.executor.podTemplateFile"
        ]
    )
    template = yaml.safe_load(config[template_path.name])
    kubernetes_validate.validate(template, K8S_VERSION, strict=True)
    pod = _one(k8s_objects, "Deployment")["spec"]["template"]["spec"]

    def claim(spec):
        return {
            v["name"]: v["persistentVolumeClaim"]["claimName"]
            for v in spec["volumes"]
            if "persistentVolumeClaim" in v
        }

    def mount(spec):
        return {m["name"]: m["mountPath"] for c in spec["containers"] for m in c.get("volumeMounts", [])}

    assert claim(template["spec"]) == claim(pod) == {"checkpoint": "replmon-checkpoint"}
    assert mount(template["spec"])["checkpoint"] == mount(pod)["checkpoint"]
    pvc = _one(k8s_objects, "PersistentVolumeClaim", "replmon-checkpoint")
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"], "pods on several nodes share it"


def load_settings_from_text(text: str):
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "replmon.toml"
        path.write_text(text)
        return load_settings(str(path))
