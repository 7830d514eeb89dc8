# The dashboard-check init container of horizon: loads the dashboard as mod_wsgi would
# (Debian's wsgi.py, local_settings.py) and renders the login page in Django's test client,
# once, before apache starts, so that a broken configuration fails here, not at a user's
# first request. Its argument is the web root without its trailing slash ("" for "/"),
# Django's SCRIPT_NAME.
import sys

DASHBOARD = "/usr/share/openstack-dashboard"


def problem(status, content):
    """What is wrong with the login page's answer, None when it came with its form."""
    if status != 200 or b"csrfmiddlewaretoken" not in content:
        return "dashboard-check: the login page answered %d without its form" % status
    return None


def main(argv, out=None):
    webroot = argv[1] if len(argv) > 1 else ""
    sys.path.insert(0, DASHBOARD)
    import wsgi  # noqa: F401 (django.setup with openstack_dashboard.settings)
    from django.test import Client
    page = Client().get("/auth/login/", HTTP_HOST="localhost", SCRIPT_NAME=webroot)
    err = problem(page.status_code, page.content)
    if err:
        sys.exit(err)
    # Django's setup may have replaced sys.stdout: the container's own.
    print("dashboard-check: the login page renders", file=out or sys.__stdout__)


if __name__ == "__main__":
    main(sys.argv)
