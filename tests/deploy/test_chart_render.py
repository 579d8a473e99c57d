"""What `helm template` renders: one pod per slot, credentials only from Secrets,
a locked-down container, probes and volumes where the bridge expects them."""

from __future__ import annotations

import base64
from typing import Any

from .chart import FULLNAME, NAMESPACE, VALUES_DIR, Helm, Rendered, load_yaml

PASSWORDS = {
    "postgresPassword": "pg-Secret-4711",
    "kafkaSaslPassword": "kafka-Secret-4712",
    "registryPassword": "registry-Secret-4713",
}
ENV_FOR = {
    "postgresPassword": "BRIDGE_SOURCE__PASSWORD",
    "kafkaSaslPassword": "BRIDGE_KAFKA__SASL_PASSWORD",
    "registryPassword": "BRIDGE_REGISTRY__BASIC_AUTH_PASSWORD",
}


def _env(rendered: Rendered) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in rendered.container.get("env", [])}


def _mounts(rendered: Rendered) -> dict[str, dict[str, Any]]:
    return {m["mountPath"]: m for m in rendered.container["volumeMounts"]}


def _volumes(rendered: Rendered) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in rendered.pod["volumes"]}


PAIR = VALUES_DIR / "standby-pair.yaml"


def test_single_replica_recreate(helm: Helm) -> None:
    singles = [p for p in VALUES_DIR.glob("*.yaml") if p != PAIR]
    for rendered in (helm.template(), *(helm.template(None, p) for p in singles)):
        spec = rendered.deployment["spec"]
        assert spec["replicas"] == 1
        assert spec["strategy"] == {"type": "Recreate"}
        assert "podAntiAffinity" not in rendered.pod.get("affinity", {})
        assert "ha" not in load_yaml(rendered.one("ConfigMap")["data"]["config.yaml"])


def test_standby_pair(helm: Helm) -> None:
    """replicaCount 2: two pods rolled one at a time with a ready standby always there, a PDB
    that lets a drain evict one of them, the pods apart, and a config that stands by."""
    rendered = helm.template(None, PAIR)
    spec = rendered.deployment["spec"]
    assert spec["replicas"] == 2
    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    pdb = rendered.one("PodDisruptionBudget")["spec"]
    assert pdb["minAvailable"] == 1 and "maxUnavailable" not in pdb
    (term,) = rendered.pod["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    selector = term["podAffinityTerm"]["labelSelector"]["matchLabels"]
    assert selector == rendered.deployment["spec"]["selector"]["matchLabels"]
    config = load_yaml(rendered.one("ConfigMap")["data"]["config.yaml"])
    assert config["ha"] == {"enabled": True, "lease_timeout_s": 10}
    assert config["kafka"]["exactly_once"] is True
    assert config["kafka"]["bootstrap_servers"] == "kafka:9092"  # the rest as given
    # a PDB can still be turned off, and an affinity of one's own replaces the default
    own: dict[str, Any] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}
    mine = helm.template({"podDisruptionBudget": {"enabled": False}, "affinity": own}, PAIR)
    assert mine.all("PodDisruptionBudget") == [] and mine.pod["affinity"] == own


def test_checksum_annotation_follows_config(helm: Helm) -> None:
    def checksum(values: dict[str, Any] | None) -> str:
        annotations = helm.template(values).deployment["spec"]["template"]["metadata"]
        value: str = annotations["annotations"]["checksum/config"]
        return value

    base = checksum(None)
    assert len(base) == 64 and int(base, 16) >= 0
    assert checksum(None) == base
    assert checksum({"config": {"log": {"level": "DEBUG"}}}) != base
    assert checksum({"config": {"source": {"host": "elsewhere"}}}) != base
    # Settings outside the bridge's config file do not restart it.
    assert checksum({"resources": {"limits": {"memory": "2Gi"}}}) == base


def test_checksum_annotation_follows_chart_made_secret(helm: Helm) -> None:
    def checksum(password: str) -> str:
        rendered = helm.template({"auth": {"postgresPassword": password}})
        value: str = rendered.deployment["spec"]["template"]["metadata"]["annotations"][
            "checksum/secret"
        ]
        return value

    assert checksum("one") != checksum("two")


def test_chart_made_secret_maps_every_password(helm: Helm) -> None:
    rendered = helm.template({"auth": PASSWORDS})
    secret = rendered.one("Secret")
    assert secret["metadata"]["name"] == f"{FULLNAME}-auth"
    decoded = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert decoded == {
        "postgres-password": PASSWORDS["postgresPassword"],
        "kafka-sasl-password": PASSWORDS["kafkaSaslPassword"],
        "registry-password": PASSWORDS["registryPassword"],
    }
    env = _env(rendered)
    for value_name, env_name in ENV_FOR.items():
        ref = env[env_name]["valueFrom"]["secretKeyRef"]
        assert ref["name"] == f"{FULLNAME}-auth"
        assert decoded[ref["key"]] == PASSWORDS[value_name]
        assert "value" not in env[env_name]


def test_chart_made_secret_maps_only_given_passwords(helm: Helm) -> None:
    rendered = helm.template(None, VALUES_DIR / "minimal.yaml")
    secret = rendered.one("Secret")
    assert set(secret["data"]) == {"postgres-password"}
    env = _env(rendered)
    assert env["BRIDGE_SOURCE__PASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "name": f"{FULLNAME}-auth",
        "key": "postgres-password",
    }
    assert "BRIDGE_KAFKA__SASL_PASSWORD" not in env
    assert "BRIDGE_REGISTRY__BASIC_AUTH_PASSWORD" not in env


def test_no_secret_and_no_credential_env_without_passwords(helm: Helm) -> None:
    rendered = helm.template()
    assert rendered.all("Secret") == []
    assert not any(name.startswith("BRIDGE_") for name in _env(rendered))


def test_existing_secret_with_custom_keys(helm: Helm) -> None:
    rendered = helm.template(None, VALUES_DIR / "existing-secret.yaml")
    assert rendered.all("Secret") == [], "no chart-made Secret next to an existing one"
    env = _env(rendered)
    expected = {
        "BRIDGE_SOURCE__PASSWORD": "pg-pass",
        "BRIDGE_KAFKA__SASL_PASSWORD": "kafka-pass",
        "BRIDGE_REGISTRY__BASIC_AUTH_PASSWORD": "registry-pass",
    }
    for env_name, key in expected.items():
        assert env[env_name]["valueFrom"]["secretKeyRef"] == {
            "name": "bridge-credentials",
            "key": key,
        }
    annotations = rendered.deployment["spec"]["template"]["metadata"]["annotations"]
    assert "checksum/secret" not in annotations


def test_existing_secret_empty_key_is_not_mapped(helm: Helm) -> None:
    rendered = helm.template({"auth": {"existingSecret": "creds"}})
    env = _env(rendered)
    assert env["BRIDGE_SOURCE__PASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "name": "creds",
        "key": "postgres-password",
    }
    assert "BRIDGE_KAFKA__SASL_PASSWORD" not in env


def test_no_password_outside_the_secret(helm: Helm) -> None:
    rendered = helm.template({"auth": PASSWORDS})
    configmap_text = str(rendered.one("ConfigMap"))
    for password in PASSWORDS.values():
        assert password not in configmap_text
    secret_b64 = [base64.b64encode(p.encode()).decode() for p in PASSWORDS.values()]
    for doc in rendered.docs:
        if doc["kind"] == "Secret":
            continue
        text = str(doc)
        for password, encoded in zip(PASSWORDS.values(), secret_b64, strict=True):
            assert password not in text and encoded not in text, doc["kind"]
    config = rendered.bridge_config
    assert "password" not in config["source"]
    assert "sasl_password" not in config["kafka"]
    assert "basic_auth_password" not in config["registry"]


def test_security_context(helm: Helm) -> None:
    rendered = helm.template()
    pod_sc = rendered.pod["securityContext"]
    assert pod_sc["runAsNonRoot"] is True
    assert pod_sc["runAsUser"] == 10001
    assert pod_sc["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = rendered.container["securityContext"]
    assert sc["runAsNonRoot"] is True
    assert sc["runAsUser"] == 10001
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert rendered.pod["automountServiceAccountToken"] is False


def test_probes_on_the_http_port(helm: Helm) -> None:
    for values, port in ((None, 9187), ({"config": {"http": {"port": 9300}}}, 9300)):
        rendered = helm.template(values)
        container = rendered.container
        assert container["ports"] == [{"name": "http", "containerPort": port, "protocol": "TCP"}]
        assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
        assert container["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
        assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
        assert rendered.bridge_config["http"]["port"] == port


def test_container_runs_the_mounted_config(helm: Helm) -> None:
    rendered = helm.template()
    assert rendered.container["args"] == ["run", "--config", "/etc/bridge/config.yaml"]
    config_mount = _mounts(rendered)["/etc/bridge"]
    assert config_mount["readOnly"] is True
    assert _volumes(rendered)[config_mount["name"]]["configMap"]["name"] == FULLNAME
    assert rendered.one("ConfigMap")["metadata"]["name"] == FULLNAME
    assert "config.yaml" in rendered.one("ConfigMap")["data"]


def test_spill_dir_and_tmp_are_empty_dirs(helm: Helm) -> None:
    cases = (
        (None, "/var/lib/bridge/spill", "2Gi"),
        (
            {"config": {"pipeline": {"spill_dir": "/data/spill"}}, "spill": {"sizeLimit": "5Gi"}},
            "/data/spill",
            "5Gi",
        ),
    )
    for values, spill_dir, size in cases:
        rendered = helm.template(values)
        assert rendered.bridge_config["pipeline"]["spill_dir"] == spill_dir
        mounts, volumes = _mounts(rendered), _volumes(rendered)
        assert volumes[mounts[spill_dir]["name"]]["emptyDir"]["sizeLimit"] == size
        assert "emptyDir" in volumes[mounts["/tmp"]["name"]]
        assert not mounts[spill_dir].get("readOnly", False)


def test_termination_grace_exceeds_shutdown_timeout(helm: Helm) -> None:
    assert helm.template().pod["terminationGracePeriodSeconds"] == 45
    slow = {"config": {"pipeline": {"shutdown_timeout_s": 90.5}}}
    assert helm.template(slow).pod["terminationGracePeriodSeconds"] == 106
    explicit = helm.template(None, VALUES_DIR / "custom-resources.yaml")
    assert explicit.pod["terminationGracePeriodSeconds"] == 120
    assert explicit.bridge_config["pipeline"]["shutdown_timeout_s"] == 90


def test_custom_resources_and_scheduling(helm: Helm) -> None:
    rendered = helm.template(None, VALUES_DIR / "custom-resources.yaml")
    assert rendered.container["resources"]["limits"] == {
        "cpu": 2,
        "memory": "3Gi",
        "ephemeral-storage": "12Gi",
    }
    assert rendered.pod["nodeSelector"] == {"kubernetes.io/os": "linux", "node-role/cdc": "true"}
    assert rendered.pod["tolerations"][0]["key"] == "dedicated"
    assert "nodeAffinity" in rendered.pod["affinity"]
    assert rendered.pod["priorityClassName"] == "high-priority"
    assert _volumes(rendered)["spill"]["emptyDir"]["sizeLimit"] == "10Gi"
    assert _mounts(rendered)["/spill"]["name"] == "spill"


def test_default_resources_are_bounded(helm: Helm) -> None:
    resources = helm.template().container["resources"]
    assert resources["requests"]["cpu"] and resources["requests"]["memory"]
    assert resources["limits"]["memory"]


def test_metrics_service_selects_the_pod(helm: Helm) -> None:
    rendered = helm.template()
    service = rendered.one("Service")
    assert service["spec"]["ports"] == [
        {"name": "http", "port": 9187, "targetPort": "http", "protocol": "TCP"}
    ]
    pod_labels = rendered.deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert rendered.deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()


def test_service_account(helm: Helm) -> None:
    rendered = helm.template()
    account = rendered.one("ServiceAccount")
    assert rendered.pod["serviceAccountName"] == account["metadata"]["name"]
    external = helm.template({"serviceAccount": {"create": False, "name": "ops"}})
    assert external.all("ServiceAccount") == []
    assert external.pod["serviceAccountName"] == "ops"


def test_service_monitor_only_when_enabled(helm: Helm) -> None:
    assert helm.template().all("ServiceMonitor") == []
    rendered = helm.template(None, VALUES_DIR / "servicemonitor-pdb.yaml")
    monitor = rendered.one("ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["namespace"] == NAMESPACE
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    endpoint = monitor["spec"]["endpoints"][0]
    assert (endpoint["port"], endpoint["path"], endpoint["interval"]) == ("http", "/metrics", "15s")
    service_labels = rendered.one("Service")["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service_labels.items()


def test_pdb_only_when_enabled(helm: Helm) -> None:
    assert helm.template().all("PodDisruptionBudget") == []
    rendered = helm.template(None, VALUES_DIR / "servicemonitor-pdb.yaml")
    pdb = rendered.one("PodDisruptionBudget")
    assert pdb["apiVersion"] == "policy/v1"
    assert pdb["spec"]["minAvailable"] == 1 and "maxUnavailable" not in pdb["spec"]
    pod_labels = rendered.deployment["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    default = helm.template({"podDisruptionBudget": {"enabled": True}})
    assert default.one("PodDisruptionBudget")["spec"]["maxUnavailable"] == 0


def test_helm_test_pod_runs_bridge_check(helm: Helm) -> None:
    rendered = helm.template(None, VALUES_DIR / "existing-secret.yaml")
    pods = rendered.all("Pod")
    assert len(pods) == 1
    check = pods[0]
    assert check["metadata"]["annotations"]["helm.sh/hook"] == "test"
    container = check["spec"]["containers"][0]
    assert container["args"] == ["check", "--config", "/etc/bridge/config.yaml"]
    assert {e["name"] for e in container["env"]} >= set(ENV_FOR.values())
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_verify_cronjob_and_alerts_only_when_enabled(helm: Helm) -> None:
    default = helm.template()
    assert default.all("CronJob") == [] and default.all("PrometheusRule") == []
    rendered = helm.template(None, VALUES_DIR / "verify-cronjob.yaml")
    cron = rendered.one("CronJob")
    assert cron["spec"]["schedule"] == "30 2 * * *"
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    job = cron["spec"]["jobTemplate"]["spec"]
    assert job["backoffLimit"] == 0
    pod = job["template"]["spec"]
    (container,) = pod["containers"]
    assert container["args"] == [
        *("verify", "--config", "/etc/bridge/config.yaml", "--format", "json"),
        *("--timeout", "600"),
        *("--tables", "public.orders", "--tables", "public.items"),
        *("--memory-limit-mb", "1024", "--repair"),
        *("--push-gateway", "http://prometheus-pushgateway.monitoring:9091"),
    ]
    assert container["resources"]["requests"] == {"cpu": "500m", "memory": "2Gi"}
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["restartPolicy"] == "Never"
    assert pod["volumes"][0]["configMap"]["name"] == FULLNAME
    tmp = {v["name"]: v for v in pod["volumes"]}["tmp"]
    assert tmp["emptyDir"]["sizeLimit"] == "20Gi"  # room for the key store's SQLite file
    assert pod["serviceAccountName"] == rendered.pod["serviceAccountName"]

    rules = rendered.one("PrometheusRule")
    assert rules["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    alerts = {r["alert"]: r for g in rules["spec"]["groups"] for r in g["rules"]}
    assert set(alerts) == {"BridgeVerifyMismatch", "BridgeVerifyNotRun"}
    mismatch = alerts["BridgeVerifyMismatch"]["expr"]
    assert 'bridge_verify_mismatches{slot="bridge"}' in mismatch
    assert 'bridge_verify_lake_mismatches{slot="bridge"}' in mismatch
    stale = alerts["BridgeVerifyNotRun"]
    assert "> 108000" in stale["expr"] and stale["for"] == "30h"
    assert "{{ $labels.table }}" in alerts["BridgeVerifyMismatch"]["annotations"]["summary"]
