"""Loads the charts' Python programs (charts/<chart>/files/<name>.py) as modules."""
import importlib.util, os

CHARTS = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def load(chart, name):
    path = os.path.join(CHARTS, chart, "files", name + ".py")
    spec = importlib.util.spec_from_file_location("%s_%s" % (chart.replace("-", "_"), name), path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
