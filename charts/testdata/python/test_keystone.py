import os, unittest

os.environ.setdefault("OS_AUTH_URL", "http://keystone.invalid:5000/v3/")

from osdtest import load

keystone = load("osd-lib", "keystone")


class FakeKeystone:
    """Keystone's collections in memory, answering keystone.request."""

    def __init__(self):
        self.items = {"domains": [{"id": "d0", "name": "Default"}], "roles": [], "projects": [], "users": [],
                      "services": [], "endpoints": []}
        self.grants, self.calls, self.n = set(), [], 0

    def request(self, method, path, body=None, token=None, attempts=5):
        self.calls.append((method, path))
        coll, _, query = path.lstrip("/").partition("?")
        parts = coll.split("/")
        if method == "GET" and len(parts) == 1:
            return 200, {coll: list(self.items.get(coll, []))}, {}
        if method == "POST" and len(parts) == 1:
            self.n += 1
            key = next(iter(body))
            item = dict(body[key], id="%s%d" % (coll[0], self.n))
            self.items[coll].append(item)
            return 201, {key: item}, {}
        if method == "POST" and coll == "auth/tokens":
            return 201, {}, {"X-Subject-Token": "t"}
        if method == "PATCH":
            return 200, {}, {}
        if len(parts) == 6 and parts[2] == "users" and parts[4] == "roles":
            grant = (parts[1], parts[3], parts[5])
            if method == "PUT":
                self.grants.add(grant)
                return 204, {}, {}
            if method == "HEAD":
                return (204 if grant in self.grants else 404), {}, {}
            if method == "DELETE":
                self.grants.discard(grant)
                return 204, {}, {}
        return 404, {"error": "no %s %s" % (method, path)}, {}


class Keystone(unittest.TestCase):
    def setUp(self):
        self.fake = FakeKeystone()
        self.saved = keystone.request
        keystone.request = self.fake.request

    def tearDown(self):
        keystone.request = self.saved

    def test_auth_url(self):
        self.assertFalse(keystone.AUTH.endswith("/"))

    def test_ensure_is_idempotent(self):
        first = keystone.ensure("roles", "role", "service")
        again = keystone.ensure("roles", "role", "service")
        self.assertEqual(first["id"], again["id"])
        self.assertEqual([r["name"] for r in self.fake.items["roles"]], ["service"])
        self.assertEqual([c for c in self.fake.calls if c[0] == "POST"], [("POST", "/roles")])

    def test_ensure_lost_race(self):
        # Another Job creates the role between the lookup and the create: 409, looked up again.
        def racing(method, path, body=None, token=None, attempts=5):
            if method == "POST":
                self.fake.items["roles"].append({"id": "r-other", "name": "admin"})
                return 409, {"error": "conflict"}, {}
            return self.fake.request(method, path, body, token, attempts)
        keystone.request = racing
        self.assertEqual(keystone.ensure("roles", "role", "admin")["id"], "r-other")

    def test_find_filters(self):
        self.fake.items["projects"] = [{"id": "p1", "name": "service", "domain_id": "other"},
                                       {"id": "p2", "name": "service", "domain_id": "d0"}]
        self.assertEqual(keystone.find("projects", "service", domain_id="d0")["id"], "p2")
        self.assertIsNone(keystone.find("projects", "admin", domain_id="d0"))

    def roles_held(self, user):
        names = {r["id"]: r["name"] for r in self.fake.items["roles"]}
        uid = next(u["id"] for u in self.fake.items["users"] if u["name"] == user)
        return sorted(names[r] for _, u, r in self.fake.grants if u == uid)

    def test_register_roles(self):
        # SVC_ROLES grants the roles named and revokes the other one of admin and service,
        # so a chart that drops admin takes it away from an existing cloud's user.
        base = {"SVC_USER": "glance", "SVC_PASSWORD": "pw", "SVC_NAME": "glance", "SVC_TYPE": "image",
                "ENDPOINT_PUBLIC": "http://p", "ENDPOINT_INTERNAL": "http://i", "ENDPOINT_ADMIN": "http://a"}
        saved = dict(os.environ)
        try:
            for roles, want in ((None, ["admin", "service"]), ("service", ["service"]), ("admin,service", ["admin", "service"])):
                os.environ.update(base)
                os.environ.pop("SVC_ROLES", None)
                if roles is not None:
                    os.environ["SVC_ROLES"] = roles
                keystone.register()
                self.assertEqual(self.roles_held("glance"), want, roles)
            self.assertEqual(len(self.fake.items["users"]), 1)
            self.assertEqual(len([e for e in self.fake.items.get("endpoints", [])]), 3)
        finally:
            os.environ.clear()
            os.environ.update(saved)

    def test_call_fails_loudly(self):
        with self.assertRaises(SystemExit) as e:
            keystone.call("GET", "/nothing/here/at/all")
        self.assertIn("keystone: GET /nothing/here/at/all: 404", str(e.exception))


if __name__ == "__main__":
    unittest.main()
