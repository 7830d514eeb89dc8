{{/* Arguments shared by the osd-lib step templates. */}}
{{- define "horizon.stepArgs" -}}
{{- $secretEnv := list (dict "name" "HORIZON_SECRET_KEY" "secret" "horizon" "key" "secret-key") -}}
{{- toJson (dict "image" "openstack" "configSecret" "horizon-config" "secretEnv" $secretEnv) -}}
{{- end -}}

{{/*
A value as a Python literal: null -> None, booleans -> True/False, integral numbers
without a fraction, strings as JSON strings (valid Python: quotes, backslashes and
control characters escaped), lists -> [...], maps -> {...} with sorted string keys.
*/}}
{{- define "horizon.py" -}}
{{- $v := . -}}
{{- if kindIs "invalid" $v -}}
None
{{- else if kindIs "bool" $v -}}
{{- ternary "True" "False" $v -}}
{{- else if kindIs "string" $v -}}
{{- toJson $v -}}
{{- else if kindIs "float64" $v -}}
{{- if eq (floor $v) $v -}}{{- int64 $v -}}{{- else -}}{{- $v -}}{{- end -}}
{{- else if or (kindIs "int" $v) (kindIs "int64" $v) -}}
{{- $v -}}
{{- else if kindIs "slice" $v -}}
{{- $parts := list -}}
{{- range $v }}{{ $parts = append $parts (include "horizon.py" .) }}{{ end -}}
[{{ join ", " $parts }}]
{{- else if kindIs "map" $v -}}
{{- $parts := list -}}
{{- range $k, $e := $v }}{{ $parts = append $parts (printf "%s: %s" (toJson $k) (include "horizon.py" $e)) }}{{ end -}}
{{ "{" }}{{ join ", " $parts }}{{ "}" }}
{{- else -}}
{{- fail (printf "horizon settings: cannot write a %s as Python" (kindOf $v)) -}}
{{- end -}}
{{- end -}}

{{/* local_settings.py from .Values.settings: one assignment per setting, sorted. */}}
{{- define "horizon.localSettings" -}}
# Written by osd from the horizon chart's values (settings). Do not edit in the pod.
{{ range $k, $v := .Values.settings -}}
{{- if not (regexMatch "^[A-Z][A-Z0-9_]*$" $k) -}}
{{- fail (printf "horizon settings: %q is not an upper-case Python name" $k) -}}
{{- end -}}
{{- if not (kindIs "invalid" $v) -}}
{{ $k }} = {{ include "horizon.py" $v }}
{{ end -}}
{{- end -}}
{{- end -}}

{{/* apache.inactivityTimeout in whole seconds (0: Django stays loaded), or a render error. */}}
{{- define "horizon.inactivityTimeout" -}}
{{- $v := toString .Values.apache.inactivityTimeout -}}
{{- if not (regexMatch "^[0-9]+$" $v) -}}
{{- fail (printf "horizon apache.inactivityTimeout: %q is not whole seconds (0 keeps Django loaded)" $v) -}}
{{- end -}}
{{- $v -}}
{{- end -}}

{{/* The web root without its trailing slash ("" for "/"). */}}
{{- define "horizon.webroot" -}}
{{- trimSuffix "/" (.Values.settings.WEBROOT | default "/") -}}
{{- end -}}

{{/*
The only enabled apache site (the pod mounts an empty sites-enabled: the image enables
default-ssl.conf without mod_ssl, which apache refuses, and 000-default's *:80 vhost).
The aliases of Debian's openstack-dashboard-alias-only.conf, the dashboard in a mod_wsgi
daemon process group, / redirected to the web root, logs to the container's stdout and
stderr.
*/}}
{{- define "horizon.apacheSite" -}}
{{- $root := include "horizon.webroot" . -}}
# Written by osd from the horizon chart's values (apache, settings.WEBROOT).
ServerName localhost
WSGISocketPrefix /run/apache2/wsgi
{{- $idle := include "horizon.inactivityTimeout" . | int }}
WSGIDaemonProcess horizon processes={{ .Values.apache.processes }} threads={{ .Values.apache.threads }} display-name=horizon-wsgi home=/usr/share/openstack-dashboard{{ if gt $idle 0 }} inactivity-timeout={{ $idle }}{{ end }}
WSGIProcessGroup horizon
WSGIApplicationGroup %{GLOBAL}
{{- if gt $idle 0 }}
# Django loads on the first request and is dropped after {{ $idle }} s without one.
{{- else }}
# Load Django when the daemon starts, not on the first request (the probes' first call).
WSGIImportScript /usr/share/openstack-dashboard/wsgi.py process-group=horizon application-group=%{GLOBAL}
{{- end }}
WSGIScriptAlias {{ $root | default "/" }} /usr/share/openstack-dashboard/wsgi.py
Alias /static /var/lib/openstack-dashboard/static
{{- if $root }}
Alias {{ $root }}/static /var/lib/openstack-dashboard/static
RedirectMatch ^/$ {{ $root }}/
{{- end }}
ErrorLog /dev/stderr
CustomLog /dev/stdout combined

<Directory /usr/share/openstack-dashboard>
	Require all granted
</Directory>

<Directory /var/lib/openstack-dashboard/static>
	Require all granted
</Directory>
{{ end -}}

{{- define "horizon.portsConf" -}}
# Written by osd (horizon chart): apache listens on the pod port only.
Listen {{ .Values.port }}
{{ end -}}

{{/* The config files (Secret keys) and where the dashboard container mounts them. */}}
{{- define "horizon.configFiles" -}}
{{- toJson (dict "local_settings.py" (include "horizon.localSettings" .) "openstack-dashboard.conf" (include "horizon.apacheSite" .) "ports.conf" (include "horizon.portsConf" .)) -}}
{{- end -}}

{{- define "horizon.mounts" -}}
{{- toJson (dict "local_settings.py" "/etc/openstack-dashboard/local_settings.py" "openstack-dashboard.conf" "/etc/apache2/sites-enabled/openstack-dashboard.conf" "ports.conf" "/etc/apache2/ports.conf") -}}
{{- end -}}
