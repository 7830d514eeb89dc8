{{/*
The day-one volume type: one Python process (standard library) that logs in as admin,
waits for cinder-api in the catalog's internal endpoint, and makes the type TYPE_NAME with
extra spec volume_backend_name = BACKEND, or corrects the spec of the existing one.
(dict ... "name" "volume-type" "typeName" "ceph" "backend" "ceph" "description" "..."
"timeout" 600 "authURL" URL "region" R).
*/}}
{{- define "cinder.volumeTypeProgram" -}}
import json, os, sys, time, urllib.error, urllib.request

env = os.environ.get
AUTH = env("OS_AUTH_URL").rstrip("/")


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


def login():
    body = {"auth": {"identity": {"methods": ["password"], "password": {"user": {
        "name": env("OS_USERNAME"), "domain": {"name": env("OS_USER_DOMAIN_NAME")}, "password": env("OS_PASSWORD")}}},
        "scope": {"project": {"name": env("OS_PROJECT_NAME"), "domain": {"name": env("OS_PROJECT_DOMAIN_NAME")}}}}}
    code, doc, headers = call("POST", AUTH + "/auth/tokens", body)
    if code != 201:
        return None, None, "keystone: %s %s" % (code or "no answer", doc.get("error"))
    for svc in doc["token"].get("catalog", []):
        if svc["type"] == "volumev3":
            for ep in svc["endpoints"]:
                if ep["interface"] == "internal" and ep.get("region_id", env("OS_REGION_NAME")) == env("OS_REGION_NAME"):
                    return headers["X-Subject-Token"], ep["url"].rstrip("/"), ""
    return None, None, "no volumev3 internal endpoint in the catalog yet"


deadline, last = time.time() + int(env("TIMEOUT")), ""
while True:
    token, base, last = login()
    if token:
        code, doc, _ = call("GET", base + "/types?is_public=None", token=token)
        if code == 200:
            break
        last = "cinder-api: %s %s" % (code or "no answer", doc.get("error"))
    if time.time() > deadline:
        sys.exit("volume type %s not made: %s" % (env("TYPE_NAME"), last))
    time.sleep(3)

name, spec = env("TYPE_NAME"), {"volume_backend_name": env("BACKEND")}
found = [t for t in doc["volume_types"] if t["name"] == name]
if not found:
    code, doc, _ = call("POST", base + "/types", {"volume_type": {"name": name, "description": env("TYPE_DESCRIPTION"),
                                                                  "os-volume-type-access:is_public": True, "extra_specs": spec}}, token)
    if code not in (200, 202):
        sys.exit("create volume type %s: %s %s" % (name, code, doc.get("error")))
    print("created volume type %s for backend %s" % (name, env("BACKEND")))
elif (found[0].get("extra_specs") or {}).get("volume_backend_name") != env("BACKEND"):
    code, doc, _ = call("POST", base + "/types/%s/extra_specs" % found[0]["id"], {"extra_specs": spec}, token)
    if code not in (200, 202):
        sys.exit("set extra specs of volume type %s: %s %s" % (name, code, doc.get("error")))
    print("volume type %s now selects backend %s" % (name, env("BACKEND")))
else:
    print("volume type %s for backend %s exists" % (name, env("BACKEND")))
{{- end -}}

{{- define "cinder.volumeTypeStep" -}}
- name: {{ .name }}
  image: {{ include "osd-lib.image" . }}
  imagePullPolicy: Never
  command:
    - python3
    - -c
    - |
      {{- include "cinder.volumeTypeProgram" . | nindent 6 }}
  env:
    {{- include "osd-lib.keystoneAdminEnv" . | nindent 4 }}
    - name: TYPE_NAME
      value: {{ .typeName | quote }}
    - name: BACKEND
      value: {{ .backend | quote }}
    - name: TYPE_DESCRIPTION
      value: {{ .description | quote }}
    - name: TIMEOUT
      value: {{ .timeout | quote }}
{{- end -}}
