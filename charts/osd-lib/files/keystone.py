# osd's Keystone registration: one Python process speaking Keystone's v3 REST API (the
# openstack client starts a new interpreter per call: a dozen calls took minutes on a busy
# host). Idempotent: everything is looked up first, created when missing, corrected when
# it differs; a create that loses a race with another Job (409) is looked up again.
#   register      service user (SVC_USER, SVC_PASSWORD, optional) with the roles SVC_ROLES
#                 (default admin,service) on project service; service SVC_NAME of SVC_TYPE; ENDPOINT_{PUBLIC,INTERNAL,ADMIN}
#   stack-domain  domain STACK_DOMAIN with DOMAIN_ADMIN (DOMAIN_ADMIN_PASSWORD) as its
#                 admin; roles OWNER_ROLE and USER_ROLE; OWNER_ROLE for admin on project admin
import http.client, json, os, sys, time, urllib.error, urllib.parse, urllib.request

AUTH = os.environ["OS_AUTH_URL"].rstrip("/")
REGION = os.environ.get("OS_REGION_NAME") or "RegionOne"
env = os.environ.get


def request(method, path, body=None, token=None, attempts=5):
    """(status, document, headers); retries dropped connections and 5xx (Keystone restarting)."""
    data = None if body is None else json.dumps(body).encode()
    for n in range(attempts):
        req = urllib.request.Request(AUTH + path, data=data, method=method,
                                     headers={"Content-Type": "application/json", "Accept": "application/json"})
        if token:
            req.add_header("X-Auth-Token", token)
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                raw = r.read()
                return r.status, (json.loads(raw) if raw else {}), r.headers
        except urllib.error.HTTPError as e:
            raw = e.read()
            if e.code >= 500 and n + 1 < attempts:
                time.sleep(1)
                continue
            try:
                msg = json.loads(raw)["error"]["message"]
            except Exception:
                msg = raw.decode(errors="replace")[:300]
            return e.code, {"error": msg}, e.headers
        except (OSError, http.client.HTTPException) as e:
            if n + 1 >= attempts:
                return 0, {"error": "%s %s%s: %s" % (method, AUTH, path, e)}, {}
            time.sleep(1)


def password_auth(user, user_domain, password, project=None, project_domain=None):
    body = {"auth": {"identity": {"methods": ["password"], "password": {
        "user": {"name": user, "domain": {"name": user_domain}, "password": password}}}}}
    if project:
        body["auth"]["scope"] = {"project": {"name": project, "domain": {"name": project_domain}}}
    return request("POST", "/auth/tokens", body, attempts=1)


def admin_token():
    """An admin token Keystone honours. While keystone-manage bootstrap still runs (the
    Jobs start side by side with Keystone's), a token issued right after the admin's role
    grant was refused (403 on GET /domains, the lookup both modes start with): the new
    token is tried with that lookup and asked again until it passes, instead of failing
    the Job's pod (whose retry re-runs the earlier steps)."""
    deadline, last = time.time() + 300, ""
    while time.time() < deadline:
        code, doc, headers = password_auth(env("OS_USERNAME", "admin"), env("OS_USER_DOMAIN_NAME", "Default"),
                                           env("OS_PASSWORD", ""), env("OS_PROJECT_NAME", "admin"),
                                           env("OS_PROJECT_DOMAIN_NAME", "Default"))
        if code == 201:
            token = headers["X-Subject-Token"]
            code, doc, _ = request("GET", "/domains?name=Default", token=token)
            if code == 200:
                return token
            last = "a new admin token is refused: GET /domains: %s %s" % (code or "no answer", doc.get("error"))
        else:
            last = "%s %s" % (code or "no answer", doc.get("error"))
        time.sleep(2)
    sys.exit("keystone at %s does not issue an admin token it honours: %s" % (AUTH, last))


TOKEN = None


def call(method, path, body=None):
    code, doc, _ = request(method, path, body, TOKEN)
    if code not in (200, 201, 204):
        sys.exit("keystone: %s %s: %s %s" % (method, path, code or "no answer", doc.get("error")))
    return doc


def find(coll, name, **filters):
    """The entity of collection coll named name (filters such as domain_id), or None."""
    query = urllib.parse.urlencode(dict(filters, name=name))
    for item in call("GET", "/%s?%s" % (coll, query))[coll]:
        if item.get("name") == name and all(item.get(k) == v for k, v in filters.items()):
            return item
    return None


def ensure(coll, key, name, attrs=None, **filters):
    item = find(coll, name, **filters)
    if item:
        return item
    body = {key: dict(attrs or {}, name=name, **filters)}
    code, doc, _ = request("POST", "/" + coll, body, TOKEN)
    if code == 201:
        print("created %s %s" % (key, name))
        return doc[key]
    if code == 409:  # another Job created it between our lookup and our create
        item = find(coll, name, **filters)
        if item:
            return item
    sys.exit("keystone: creating %s %s: %s %s" % (key, name, code or "no answer", doc.get("error")))


def ensure_user(name, domain, password):
    user = ensure("users", "user", name, {"password": password, "enabled": True}, domain_id=domain["id"])
    code, _, _ = password_auth(name, domain["name"], password)
    if code != 201:  # a password from an earlier install or a rotated Secret
        call("PATCH", "/users/" + user["id"], {"user": {"password": password, "enabled": True}})
        print("set the password of user %s" % name)
    return user


def grant(role, user, project=None, domain=None):
    target = "/projects/" + project["id"] if project else "/domains/" + domain["id"]
    call("PUT", "%s/users/%s/roles/%s" % (target, user["id"], role["id"]))


def revoke(role, user, project):
    """Takes role away from user on project when held (404: not held)."""
    path = "/projects/%s/users/%s/roles/%s" % (project["id"], user["id"], role["id"])
    code, doc, _ = request("HEAD", path, token=TOKEN)
    if code == 404:
        return
    if code not in (200, 204):
        sys.exit("keystone: HEAD %s: %s %s" % (path, code or "no answer", doc.get("error")))
    call("DELETE", path)
    print("revoked role %s of user %s" % (role["name"], user["name"]))


def register():
    default = find("domains", "Default") or sys.exit("keystone has no Default domain")
    if env("SVC_USER"):
        service_project = ensure("projects", "project", "service", {"description": "OpenStack services"},
                                 domain_id=default["id"])
        user = ensure_user(env("SVC_USER"), default, env("SVC_PASSWORD", ""))
        # SVC_ROLES: the roles the service user holds on project service, of the two osd
        # manages (admin, service); the other one is revoked when held (a chart that no
        # longer needs admin takes it away from an existing cloud's user). The service role
        # marks the user's token as a service's: Keystone validates tokens for it (no admin
        # needed for that), and Cinder deletes the attachment of a volume a server still
        # has (Nova's detach, a server's delete) only for a service token with it
        # (service_token_roles), else answers 409. Keystone's bootstrap does not make it.
        wanted = [r for r in env("SVC_ROLES", "admin,service").split(",") if r]
        for name in ("admin", "service"):
            role = ensure("roles", "role", name)
            if name in wanted:
                grant(role, user, project=service_project)
            else:
                revoke(role, user, project=service_project)
    name = env("SVC_NAME")
    service = next((s for s in call("GET", "/services")["services"] if s.get("name") == name), None)
    if service is None:
        service = call("POST", "/services", {"service": {"name": name, "type": env("SVC_TYPE"),
                                                         "description": env("SVC_DESCRIPTION", name), "enabled": True}})["service"]
        print("created service %s" % name)
    for iface in ("public", "internal", "admin"):
        url = env("ENDPOINT_" + iface.upper())
        query = urllib.parse.urlencode({"service_id": service["id"], "interface": iface, "region_id": REGION})
        found = [e for e in call("GET", "/endpoints?" + query)["endpoints"]
                 if e["service_id"] == service["id"] and e["interface"] == iface and e.get("region_id") == REGION]
        if not found:
            call("POST", "/endpoints", {"endpoint": {"service_id": service["id"], "interface": iface, "url": url,
                                                     "region_id": REGION, "enabled": True}})
            print("created %s endpoint %s" % (iface, url))
        elif found[0]["url"] != url:
            call("PATCH", "/endpoints/" + found[0]["id"], {"endpoint": {"url": url}})
            print("moved %s endpoint to %s" % (iface, url))
    print("keystone registration of %s done" % name)


def stack_domain():
    domain = ensure("domains", "domain", env("STACK_DOMAIN"), {"description": "Heat stack projects and users", "enabled": True})
    domain_admin = ensure_user(env("DOMAIN_ADMIN"), domain, env("DOMAIN_ADMIN_PASSWORD", ""))
    grant(ensure("roles", "role", "admin"), domain_admin, domain=domain)
    owner = ensure("roles", "role", env("OWNER_ROLE"))
    ensure("roles", "role", env("USER_ROLE"))
    default = find("domains", "Default") or sys.exit("keystone has no Default domain")
    admin = find("users", env("OS_USERNAME", "admin"), domain_id=default["id"]) or sys.exit("keystone has no admin user")
    admin_project = find("projects", env("OS_PROJECT_NAME", "admin"), domain_id=default["id"]) or sys.exit("keystone has no admin project")
    grant(owner, admin, project=admin_project)
    print("stack domain %s with %s ready" % (domain["name"], domain_admin["name"]))


if __name__ == "__main__":
    modes = {"register": register, "stack-domain": stack_domain}
    if len(sys.argv) != 2 or sys.argv[1] not in modes:
        sys.exit("usage: osd-keystone register|stack-domain")
    TOKEN = admin_token()
    modes[sys.argv[1]]()
