"""The Kubernetes example (deploy/kubernetes/): manifests a cluster would take, agreeing with
each other, with the image and with orgate.

Nothing here runs a cluster. The manifests are linted (yamllint), validated in strict mode
(an unknown field is an error) against the Kubernetes API's own schemas for the oldest and the
newest version kubernetes-validate ships, and their settings are checked against orgate's:
the configuration passes ``orgate config check`` with the Secret's keys as its environment,
the grace period covers the preStop pause, ``drain_timeout`` and the shutdown's last grace,
and the probes, Service, PodDisruptionBudget and Ingress name the pods and the port the image
serves on.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import latest_version
from yamllint import linter
from yamllint.config import YamlLintConfig

from orgate.cli import build_parser
from orgate.server.shutdown import FINISH_GRACE
from tests.deploy.test_container import dockerfile_env, instruction
from tests.server_process import REPO

MANIFESTS = REPO / "deploy" / "kubernetes"
#: The oldest Kubernetes the example is meant for, and the newest the validator knows.
VERSIONS = ("1.29", latest_version())
LINT = YamlLintConfig(
    "extends: default\n"
    "rules:\n"
    "  document-start: disable\n"
    "  line-length: {max: 100}\n"
    "  comments: {min-spaces-from-content: 1}\n"
)


def manifests() -> dict[str, dict[str, Any]]:
    """Kind → its manifest (one per file)."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(MANIFESTS.glob("*.yaml")):
        documents = [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
        assert len(documents) == 1, path
        assert documents[0]["kind"] not in found, path
        found[documents[0]["kind"]] = documents[0]
    return found


def pod_spec() -> dict[str, Any]:
    return dict(manifests()["Deployment"]["spec"]["template"]["spec"])


def container() -> dict[str, Any]:
    containers = pod_spec()["containers"]
    assert len(containers) == 1
    return dict(containers[0])


def test_every_kind_of_the_example_is_there() -> None:
    assert set(manifests()) == {
        "ConfigMap",
        "Secret",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "Ingress",
    }


@pytest.mark.parametrize("path", sorted(MANIFESTS.glob("*.yaml")), ids=lambda p: p.name)
def test_the_manifests_pass_yamllint(path: Path) -> None:
    problems = list(linter.run(path.read_text(), LINT, str(path)))
    assert not problems, [f"{p.line}:{p.column} {p.message}" for p in problems]


@pytest.mark.parametrize("version", VERSIONS)
def test_the_manifests_match_the_kubernetes_api_schemas(version: str) -> None:
    for kind, manifest in manifests().items():
        try:
            kubernetes_validate.validate(manifest, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{kind} for Kubernetes {version}: {exc.message}")


def test_the_schema_check_refuses_a_misspelt_field() -> None:
    """The validation bites: a field the API does not have is an error in strict mode."""
    deployment = manifests()["Deployment"]
    deployment["spec"]["template"]["spec"]["terminationGracePeriod"] = 50
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, VERSIONS[-1], strict=True)


def _configuration(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The ConfigMap's orgate.toml as a file, and the environment a pod gives it: the image's
    ENV and the Secret's keys."""
    config = tmp_path / "orgate.toml"
    config.write_text(manifests()["ConfigMap"]["data"]["orgate.toml"])
    secret = manifests()["Secret"]["stringData"]
    return config, {**dockerfile_env(), **secret}


def test_the_configuration_passes_orgate_config_check_with_the_secrets_keys(
    tmp_path: Path,
) -> None:
    config, env = _configuration(tmp_path)
    named = set(re.findall(r'"env:([A-Z0-9_]+)"', config.read_text()))
    assert named == set(manifests()["Secret"]["stringData"]), "the Secret holds exactly those"
    checked = subprocess.run(
        [sys.executable, "-m", "orgate.cli", "config", "check", str(config)],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", **env},
        check=False,
    )
    assert checked.returncode == 0 and "is valid" in checked.stderr, checked.stderr
    settings = tomllib.loads(config.read_text())
    assert settings["store"]["url"] == "env:ORGATE_STORE_URL"
    assert env["ORGATE_STORE_URL"].startswith("postgresql://")  # several replicas: PostgreSQL
    assert settings["ratelimit"]["redis_url"] == "env:ORGATE_REDIS_URL"
    assert settings["compaction"]["secret"] == "env:ORGATE_COMPACTION_SECRET"


def test_the_grace_period_covers_the_pause_the_drain_and_the_last_saves() -> None:
    drain = tomllib.loads(manifests()["ConfigMap"]["data"]["orgate.toml"])["server"][
        "drain_timeout"
    ]
    pause_command = container()["lifecycle"]["preStop"]["exec"]["command"]
    assert pause_command[0] == "sleep"
    pause = float(pause_command[1])
    grace = pod_spec()["terminationGracePeriodSeconds"]
    assert grace >= pause + drain + FINISH_GRACE, (grace, pause, drain, FINISH_GRACE)
    # the liveness probe does not give up on a replica before its drain could end
    live = container()["livenessProbe"]
    assert live["periodSeconds"] * live["failureThreshold"] >= drain + FINISH_GRACE


def test_the_pods_run_the_image_as_the_dockerfile_builds_it() -> None:
    spec, main = pod_spec(), container()
    arguments = build_parser().parse_args(["serve", *main["args"]])
    config_dir = str(Path(arguments.config).parent)
    mounts = {mount["mountPath"]: mount["name"] for mount in main["volumeMounts"]}
    volumes = {volume["name"]: volume for volume in spec["volumes"]}
    assert (
        volumes[mounts[config_dir]]["configMap"]["name"]
        == manifests()["ConfigMap"]["metadata"]["name"]
    )
    assert Path(arguments.config).name in manifests()["ConfigMap"]["data"]
    for data_dir in json.loads(instruction("VOLUME")[0]):
        assert data_dir in mounts, data_dir
    assert "/tmp" in mounts and main["securityContext"]["readOnlyRootFilesystem"] is True
    uid = re.search(r"--uid (\d+)", " ".join(instruction("RUN")))
    assert uid and spec["securityContext"]["runAsUser"] == int(uid.group(1))
    port = {p["name"]: p["containerPort"] for p in main["ports"]}["http"]
    assert str(port) == dockerfile_env()["ORGATE_SERVER__PORT"]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert main[probe]["httpGet"] == {"path": "/healthz", "port": "http"}, probe
    assert main["envFrom"] == [{"secretRef": {"name": manifests()["Secret"]["metadata"]["name"]}}]


def test_the_service_budget_and_ingress_select_the_pods() -> None:
    found = manifests()
    labels = found["Deployment"]["spec"]["template"]["metadata"]["labels"]
    selector = found["Deployment"]["spec"]["selector"]["matchLabels"]
    assert selector.items() <= labels.items()
    service = found["Service"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert "sessionAffinity" not in service["spec"]  # any replica serves any request
    assert [p["targetPort"] for p in service["spec"]["ports"]] == ["http"]
    budget = found["PodDisruptionBudget"]["spec"]
    assert budget["selector"]["matchLabels"].items() <= labels.items()
    assert budget["maxUnavailable"] < found["Deployment"]["spec"]["replicas"]
    paths = found["Ingress"]["spec"]["rules"][0]["http"]["paths"]
    for path in paths:
        backend = path["backend"]["service"]
        assert backend == {"name": service["metadata"]["name"], "port": {"name": "http"}}
    assert not any(p["path"] in ("/", "/metrics") for p in paths)  # /metrics stays inside
    annotations = found["Ingress"]["metadata"]["annotations"]
    assert annotations["nginx.ingress.kubernetes.io/proxy-buffering"] == "off"
    assert int(annotations["nginx.ingress.kubernetes.io/proxy-read-timeout"]) >= 600
