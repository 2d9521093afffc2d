"""deploy/prometheus: promtool checks the alert rules, runs their unit tests
(alerts_test.yml), checks the scrape configuration, and lints a real
exposition of the coordinator's metrics (`print_metrics`, a
CoordinatorMetrics over a fake snapshot). The scrape annotations it relies
on are the ones deploy/kubernetes.yaml sets.

Run: MOETUNE_PRINT_METRICS=build/tests/print_metrics \
       python3 -m unittest tests/deploy/prometheus_test.py
Skips (with the reason) where promtool is missing: scripts/setup.sh installs
Debian's `prometheus` package, which has it.
"""

import json
import os
import pathlib
import re
import shutil
import subprocess
import tempfile
import unittest

import yaml

SOURCE = pathlib.Path(
    os.environ.get("MOETUNE_SOURCE_DIR",
                   pathlib.Path(__file__).resolve().parents[2]))
PROMETHEUS = SOURCE / "deploy" / "prometheus"
PROMTOOL = shutil.which("promtool")
CREDENTIALS = "/etc/prometheus/moetune/"


def promtool(*args, stdin=None):
    return subprocess.run([PROMTOOL, *args], input=stdin, capture_output=True,
                          text=True, timeout=120, check=False)


@unittest.skipIf(PROMTOOL is None,
                 "promtool not found (Debian package prometheus)")
class PromtoolTest(unittest.TestCase):

    def assertPasses(self, result):
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)

    def test_alert_rules_check(self):
        result = promtool("check", "rules", str(PROMETHEUS / "alerts.yml"))
        self.assertPasses(result)
        self.assertIn("SUCCESS: 5 rules found", result.stdout)

    def test_alert_rules_unit_tests(self):
        result = promtool("test", "rules",
                          str(PROMETHEUS / "alerts_test.yml"))
        self.assertPasses(result)
        self.assertIn("SUCCESS", result.stdout)

    def test_scrape_config_check(self):
        """The credentials' paths point at stand-ins; a promtool built without
        Kubernetes discovery (Debian's) checks the other jobs."""
        config = yaml.safe_load((PROMETHEUS / "scrape.yml").read_text())
        with tempfile.TemporaryDirectory() as tmp:
            for name in ("read.token", "ca.pem"):
                pathlib.Path(tmp, name).write_text("stand-in\n")
            shutil.copy(PROMETHEUS / "alerts.yml", tmp)
            path = pathlib.Path(tmp, "scrape.yml")
            text = yaml.safe_dump(config).replace(CREDENTIALS, tmp + "/")
            path.write_text(text)
            result = promtool("check", "config", str(path))
            if "kubernetes_sd_configs not found" in result.stdout + result.stderr:
                config["scrape_configs"] = [
                    job for job in config["scrape_configs"]
                    if "kubernetes_sd_configs" not in job]
                path.write_text(
                    yaml.safe_dump(config).replace(CREDENTIALS, tmp + "/"))
                result = promtool("check", "config", str(path))
            self.assertPasses(result)

    @unittest.skipIf("MOETUNE_PRINT_METRICS" not in os.environ,
                     "MOETUNE_PRINT_METRICS (build/tests/print_metrics) unset")
    def test_exposition_passes_check_metrics(self):
        text = subprocess.run([os.environ["MOETUNE_PRINT_METRICS"]],
                              capture_output=True, text=True, check=True,
                              timeout=60).stdout
        for name in ("moetune_build_info", "moetune_trial_duration_seconds",
                     "moetune_worker_busy_seconds_total",
                     "process_start_time_seconds",
                     "process_resident_memory_bytes", "process_open_fds",
                     "moetune_best_median_seconds"):
            self.assertIn(f"# TYPE {name} ", text)
        result = promtool("check", "metrics", stdin=text)
        self.assertPasses(result)
        self.assertEqual(result.stdout + result.stderr, "")


@unittest.skipIf("MOETUNE_PRINT_METRICS" not in os.environ,
                 "MOETUNE_PRINT_METRICS (build/tests/print_metrics) unset")
class SeriesExistTest(unittest.TestCase):
    """Every series the alerts and the Grafana dashboard query is one the
    coordinator exposes (a renamed metric would leave them silently empty)."""

    @classmethod
    def setUpClass(cls):
        text = subprocess.run([os.environ["MOETUNE_PRINT_METRICS"]],
                              capture_output=True, text=True, check=True,
                              timeout=60).stdout
        cls.exposed = set(re.findall(r"^# TYPE (\S+) ", text, re.M))

    def check(self, expressions):
        self.assertTrue(expressions)
        for expr in expressions:
            for name in re.findall(r"\b((?:moetune|process)_[a-z_]+)", expr):
                with self.subTest(expr=expr, name=name):
                    base = re.sub(r"_(bucket|count|sum)$", "", name)
                    self.assertIn(base, self.exposed)

    def test_alert_expressions(self):
        rules = yaml.safe_load((PROMETHEUS / "alerts.yml").read_text())
        self.check([rule["expr"] for group in rules["groups"]
                    for rule in group["rules"]])

    def test_dashboard_expressions(self):
        dashboard = json.loads(
            (SOURCE / "deploy" / "grafana" / "moetune-dashboard.json")
            .read_text())
        self.check([target["expr"] for panel in dashboard["panels"]
                    for target in panel["targets"]])


class ScrapeConfigTest(unittest.TestCase):
    """The Kubernetes job's relabelling, without promtool: what it keeps and
    the address it builds from the manifest's own annotations."""

    def test_kubernetes_job_targets_the_annotated_port(self):
        config = yaml.safe_load((PROMETHEUS / "scrape.yml").read_text())
        job = next(j for j in config["scrape_configs"]
                   if "kubernetes_sd_configs" in j)
        manifest = list(yaml.safe_load_all(
            (SOURCE / "deploy" / "kubernetes.yaml").read_text()))
        pod = next(d for d in manifest if d["kind"] == "StatefulSet")
        annotations = pod["spec"]["template"]["metadata"]["annotations"]
        address = next(r for r in job["relabel_configs"]
                       if r.get("target_label") == "__address__")
        joined = "10.0.0.7:50051;" + annotations["prometheus.io/port"]
        match = re.fullmatch(address["regex"], joined)
        self.assertIsNotNone(match)
        replacement = address["replacement"].replace("$1", match.group(1))
        self.assertEqual(replacement.replace("$2", match.group(2)),
                         "10.0.0.7:50080")
        keep = [r for r in job["relabel_configs"] if r.get("action") == "keep"]
        self.assertEqual(keep[0]["regex"],
                         annotations["prometheus.io/scrape"])


if __name__ == "__main__":
    unittest.main()
