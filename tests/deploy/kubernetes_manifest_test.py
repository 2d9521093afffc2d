"""deploy/kubernetes.yaml: every document parses, and every container of every
pod asks for and caps CPU and memory, runs a pinned image (the release
version, never :latest), and the long-running ones are probed; GPU pods are
tolerated onto and selected to GPU nodes; Prometheus finds the coordinator.

Run: python3 -m unittest tests/deploy/kubernetes_manifest_test.py
(MOETUNE_SOURCE_DIR: the repository, default two levels up).
"""

import os
import pathlib
import re
import unittest

import yaml

SOURCE = pathlib.Path(
    os.environ.get("MOETUNE_SOURCE_DIR",
                   pathlib.Path(__file__).resolve().parents[2]))
MANIFEST = SOURCE / "deploy" / "kubernetes.yaml"
GPU = "nvidia.com/gpu"
SCRAPE = {"prometheus.io/scrape": "true", "prometheus.io/port": "50080",
          "prometheus.io/path": "/metrics", "prometheus.io/scheme": "https"}


def project_version():
    text = (SOURCE / "CMakeLists.txt").read_text()
    return re.search(r"project\(moetune VERSION ([0-9.]+)", text).group(1)


def quantity(value):
    """A Kubernetes quantity ("500m", "2", "32Gi", 1) as a number."""
    units = {"m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40,
             "k": 1e3, "M": 1e6, "G": 1e9}
    match = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(value))
    assert match, f"not a quantity: {value!r}"
    return float(match.group(1)) * units.get(match.group(2), 1)


def pod_templates(documents):
    """(name, pod template) of every workload that makes pods."""
    for doc in documents:
        kind, name = doc["kind"], doc["metadata"]["name"]
        if kind in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
            yield name, doc["spec"]["template"]
        elif kind == "CronJob":
            yield name, doc["spec"]["jobTemplate"]["spec"]["template"]
        elif kind == "Pod":
            yield name, doc


class KubernetesManifestTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        with open(MANIFEST) as f:
            cls.documents = [d for d in yaml.safe_load_all(f) if d]
        cls.pods = dict(pod_templates(cls.documents))

    def containers(self):
        for name, pod in self.pods.items():
            for container in pod["spec"]["containers"]:
                yield name, pod, container

    def test_every_document_has_kind_and_name(self):
        self.assertEqual(
            [d["kind"] for d in self.documents],
            ["Service", "StatefulSet", "Deployment", "ConfigMap", "CronJob"])
        for doc in self.documents:
            self.assertTrue(doc["apiVersion"])
            self.assertTrue(doc["metadata"]["name"])

    def test_every_container_requests_and_caps_cpu_and_memory(self):
        for name, _, container in self.containers():
            with self.subTest(pod=name, container=container["name"]):
                resources = container["resources"]
                for key in ("cpu", "memory"):
                    request = quantity(resources["requests"][key])
                    limit = quantity(resources["limits"][key])
                    self.assertGreater(request, 0)
                    self.assertGreaterEqual(limit, request)

    def test_images_are_pinned_to_the_release_version(self):
        version = project_version()
        for name, _, container in self.containers():
            with self.subTest(pod=name, container=container["name"]):
                image = container["image"]
                self.assertNotIn("latest", image)
                self.assertEqual(image, f"moetune:{version}")

    def test_gpu_pods_ask_for_a_gpu_tolerate_and_select_gpu_nodes(self):
        gpu_pods = 0
        for name, pod, container in self.containers():
            limits = container["resources"]["limits"]
            if GPU not in limits:
                continue
            gpu_pods += 1
            with self.subTest(pod=name):
                self.assertEqual(container["resources"]["requests"][GPU],
                                 limits[GPU])
                spec = pod["spec"]
                self.assertIn({"key": GPU, "operator": "Exists",
                               "effect": "NoSchedule"}, spec["tolerations"])
                self.assertEqual(
                    spec["nodeSelector"], {"nvidia.com/gpu.present": "true"})
        self.assertEqual(gpu_pods, 1)  # the workers

    def test_workers_have_guaranteed_qos(self):
        worker = self.pods["moetune-worker"]["spec"]["containers"][0]
        self.assertEqual(worker["resources"]["requests"],
                         worker["resources"]["limits"])

    def test_long_running_containers_are_probed(self):
        for name in ("moetune-coordinator", "moetune-worker"):
            for container in self.pods[name]["spec"]["containers"]:
                with self.subTest(pod=name):
                    for probe in ("readinessProbe", "livenessProbe"):
                        self.check_probe(container, container[probe])

    def check_probe(self, container, probe):
        if "httpGet" in probe:
            ports = [p["containerPort"] for p in container["ports"]]
            self.assertIn(probe["httpGet"]["port"], ports)
            self.assertEqual(probe["httpGet"]["path"], "/healthz")
        else:
            self.assertTrue(probe["exec"]["command"])

    def test_coordinator_pod_and_service_carry_scrape_annotations(self):
        service = next(d for d in self.documents if d["kind"] == "Service")
        pod = self.pods["moetune-coordinator"]
        for metadata in (service["metadata"], pod["metadata"]):
            self.assertEqual(metadata["annotations"], SCRAPE)
        http_ports = [p["port"] for p in service["spec"]["ports"]]
        self.assertIn(int(SCRAPE["prometheus.io/port"]), http_ports)


if __name__ == "__main__":
    unittest.main()
