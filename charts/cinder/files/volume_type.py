# The day-one volume type: one Python process (standard library) that logs in as admin,
# waits for cinder-api in the catalog's internal endpoint, and makes the type TYPE_NAME with
# extra spec volume_backend_name = BACKEND, or corrects the spec of the existing one.
# Environment: OS_AUTH_URL, OS_USERNAME, OS_USER_DOMAIN_NAME, OS_PASSWORD, OS_PROJECT_NAME,
# OS_PROJECT_DOMAIN_NAME, OS_REGION_NAME, TYPE_NAME, BACKEND, TYPE_DESCRIPTION, TIMEOUT.
import json, os, sys, time, urllib.error, urllib.request

env = os.environ.get


def call(method, url, body=None, token=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json", "Accept": "application/json"})
    if token:
        req.add_header("X-Auth-Token", token)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            raw = r.read()
            return r.status, (json.loads(raw) if raw else {}), r.headers
    except urllib.error.HTTPError as e:
        return e.code, {"error": e.read().decode(errors="replace")[:300]}, e.headers
    except OSError as e:
        return 0, {"error": str(e)}, {}


def volume_endpoint(catalog, region):
    """The internal volumev3 URL of region in a token's catalog, or None."""
    for svc in catalog:
        if svc["type"] == "volumev3":
            for ep in svc["endpoints"]:
                if ep["interface"] == "internal" and ep.get("region_id", region) == region:
                    return ep["url"].rstrip("/")
    return None


def login(auth):
    body = {"auth": {"identity": {"methods": ["password"], "password": {"user": {
        "name": env("OS_USERNAME"), "domain": {"name": env("OS_USER_DOMAIN_NAME")}, "password": env("OS_PASSWORD")}}},
        "scope": {"project": {"name": env("OS_PROJECT_NAME"), "domain": {"name": env("OS_PROJECT_DOMAIN_NAME")}}}}}
    code, doc, headers = call("POST", auth + "/auth/tokens", body)
    if code != 201:
        return None, None, "keystone: %s %s" % (code or "no answer", doc.get("error"))
    url = volume_endpoint(doc["token"].get("catalog", []), env("OS_REGION_NAME"))
    if url:
        return headers["X-Subject-Token"], url, ""
    return None, None, "no volumev3 internal endpoint in the catalog yet"


def decide(types, name, backend):
    """What to do with the volume types cinder lists: ("create", None), ("set-spec", type)
    when the type selects another backend, or ("exists", type)."""
    found = [t for t in types if t["name"] == name]
    if not found:
        return "create", None
    if (found[0].get("extra_specs") or {}).get("volume_backend_name") != backend:
        return "set-spec", found[0]
    return "exists", found[0]


def main():
    auth = env("OS_AUTH_URL").rstrip("/")
    deadline, last = time.time() + int(env("TIMEOUT")), ""
    while True:
        token, base, last = login(auth)
        if token:
            code, doc, _ = call("GET", base + "/types?is_public=None", token=token)
            if code == 200:
                break
            last = "cinder-api: %s %s" % (code or "no answer", doc.get("error"))
        if time.time() > deadline:
            sys.exit("volume type %s not made: %s" % (env("TYPE_NAME"), last))
        time.sleep(3)

    name, backend = env("TYPE_NAME"), env("BACKEND")
    spec = {"volume_backend_name": backend}
    action, found = decide(doc["volume_types"], name, backend)
    if action == "create":
        code, doc, _ = call("POST", base + "/types", {"volume_type": {"name": name, "description": env("TYPE_DESCRIPTION"),
                                                                      "os-volume-type-access:is_public": True, "extra_specs": spec}}, token)
        if code not in (200, 202):
            sys.exit("create volume type %s: %s %s" % (name, code, doc.get("error")))
        print("created volume type %s for backend %s" % (name, backend))
    elif action == "set-spec":
        code, doc, _ = call("POST", base + "/types/%s/extra_specs" % found["id"], {"extra_specs": spec}, token)
        if code not in (200, 202):
            sys.exit("set extra specs of volume type %s: %s %s" % (name, code, doc.get("error")))
        print("volume type %s now selects backend %s" % (name, backend))
    else:
        print("volume type %s for backend %s exists" % (name, backend))


if __name__ == "__main__":
    main()
