import io, sys, types, unittest

from osdtest import load

dashboard_check = load("horizon", "dashboard_check")


class FakeDjango:
    """wsgi and django.test in sys.modules for one test: a Client answering status, content."""

    def __init__(self, status, content):
        self.calls = []
        fake = self

        class Client:
            def get(self, path, **kw):
                fake.calls.append((path, kw))
                return types.SimpleNamespace(status_code=status, content=content)

        self.modules = {"wsgi": types.ModuleType("wsgi"), "django": types.ModuleType("django"),
                        "django.test": types.ModuleType("django.test")}
        self.modules["django.test"].Client = Client

    def __enter__(self):
        self.saved = {k: sys.modules.get(k) for k in self.modules}
        self.path = list(sys.path)
        sys.modules.update(self.modules)
        return self

    def __exit__(self, *exc):
        for k, v in self.saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
        sys.path[:] = self.path


class DashboardCheck(unittest.TestCase):
    def test_problem(self):
        self.assertIsNone(dashboard_check.problem(200, b'<input name="csrfmiddlewaretoken">'))
        self.assertIn("answered 200 without its form", dashboard_check.problem(200, b"<html></html>"))
        self.assertIn("answered 500", dashboard_check.problem(500, b"csrfmiddlewaretoken"))

    def test_renders(self):
        out = io.StringIO()
        with FakeDjango(200, b"csrfmiddlewaretoken") as django:
            dashboard_check.main(["-c", "/horizon"], out=out)
            self.assertEqual(sys.path[0], dashboard_check.DASHBOARD)
        self.assertEqual(django.calls, [("/auth/login/", {"HTTP_HOST": "localhost", "SCRIPT_NAME": "/horizon"})])
        self.assertEqual(out.getvalue(), "dashboard-check: the login page renders\n")

    def test_root(self):
        with FakeDjango(200, b"csrfmiddlewaretoken") as django:
            dashboard_check.main(["-c", ""], out=io.StringIO())
        self.assertEqual(django.calls[0][1]["SCRIPT_NAME"], "")

    def test_fails(self):
        with FakeDjango(302, b"") as django, self.assertRaises(SystemExit) as e:
            dashboard_check.main(["-c", "/horizon"], out=io.StringIO())
        self.assertEqual(str(e.exception), "dashboard-check: the login page answered 302 without its form")


if __name__ == "__main__":
    unittest.main()
