{{/*
An OVSDB server's start: (dict "ctx" $ "db" "nb") or "sb". Creates the database on first
start, converts it when the schema changed (a new OVN package), then serves it in the
foreground. A file whose header or schema record cannot be read stops ovsdb-server for
good (a torn last record is skipped and the rest served): the southbound database is then
moved aside and created empty, since ovn-northd rebuilds it from the northbound one and
ovn-controller registers its chassis again; the northbound database (the logical network
Neutron wrote) is never moved by itself: status says what to do.
*/}}
{{- define "ovn.ovsdbScript" -}}
db=/var/lib/ovn/ovn{{ .db }}_db.db
schema=/usr/share/ovn/ovn-{{ .db }}.ovsschema
if [ -s "$db" ] && ! conv=$(ovsdb-tool needs-conversion "$db" "$schema" 2>&1); then
  echo "$conv" >&2
  {{- if eq .db "sb" }}
  aside="$db.corrupt-$(date -u +%Y%m%dT%H%M%SZ)"
  mv "$db" "$aside"
  echo "osd: the southbound database cannot be read: moved it aside to $aside; an empty one is created, ovn-northd fills it from the northbound database"
  {{- else }}
  exit 1
  {{- end }}
fi
if [ ! -s "$db" ]; then
  ovsdb-tool create "$db" "$schema"
elif [ "$(ovsdb-tool needs-conversion "$db" "$schema")" = yes ]; then
  ovsdb-tool convert "$db" "$schema"
fi
# SSL only, with the certificate osd issued from its OVN CA; a client must
# present one from that CA. {{- if eq .db "sb" }} Chassis connect on port
# {{ .ctx.Values.ports.sb }}, whose Connection row (set by the northd container)
# has RBAC role ovn-controller: a chassis writes only its own rows. Neutron's
# server and osd use {{ .ctx.Values.ports.sbCentral }}, with no role.{{ end }}
exec ovsdb-server "$db" \
  --remote=punix:/run/ovn/ovn{{ .db }}_db.sock \
  {{- if eq .db "nb" }}
  --remote=pssl:{{ .ctx.Values.ports.nb }}:0.0.0.0 \
  {{- else }}
  --remote=db:OVN_Southbound,SB_Global,connections \
  --remote=pssl:{{ .ctx.Values.ports.sbCentral }}:0.0.0.0 \
  {{- end }}
  --private-key=/etc/ovn/tls/tls.key \
  --certificate=/etc/ovn/tls/tls.crt \
  --ca-cert=/etc/ovn/tls/ca.crt \
  --pidfile=/run/ovn/ovn{{ .db }}_db.pid \
  --unixctl=/run/ovn/ovn{{ .db }}_db.ctl \
  -vconsole:info -vfile:off
{{ end -}}

{{/* ovn-northd's start, once both databases answer on their sockets: (the root context). */}}
{{- define "ovn.northdScript" -}}
for db in nb sb; do
  until [ -S /run/ovn/ovn${db}_db.sock ]; do sleep 1; done
done
# The southbound port for chassis, restricted by OVN's ovn-controller RBAC
# role (ovn-northd fills the RBAC tables); replaces any older connection.
ovn-sbctl --db=unix:/run/ovn/ovnsb_db.sock --timeout=30 init -- \
  set-connection role=ovn-controller pssl:{{ .Values.ports.sb }}:0.0.0.0
exec ovn-northd \
  --ovnnb-db=unix:/run/ovn/ovnnb_db.sock \
  --ovnsb-db=unix:/run/ovn/ovnsb_db.sock \
  --pidfile=/run/ovn/ovn-northd.pid \
  -vconsole:info -vfile:off
{{ end -}}

{{/*
ovn-controller's start (the root context): points the host's Open vSwitch at the SB
database and describes this chassis, then runs ovn-controller. Gateway chassis (GATEWAY
enabled) also get the bridge mappings and host routers.
*/}}
{{- define "ovn.controllerScript" -}}
sock={{ .Values.controller.ovsRunDir }}/db.sock
i=0
until ovs-vsctl --db=unix:$sock --timeout=5 show >/dev/null 2>&1; do
  i=$((i+1)); [ "$i" -lt 60 ] || { echo "no Open vSwitch database at $sock: host preparation must run first"; exit 1; }
  sleep 2
done
vsctl() { ovs-vsctl --db=unix:$sock --timeout=10 "$@"; }
sb=$(getent hosts ovn-sb.{{ .Release.Namespace }}.svc.cluster.local | awk '{print $1}')
[ -n "$sb" ] || { echo "cannot resolve ovn-sb.{{ .Release.Namespace }}.svc.cluster.local"; exit 1; }
dp={{ .Values.controller.datapathType | quote }}
if [ -z "$dp" ]; then
  dp=$(vsctl --if-exists get bridge br-ex datapath_type 2>/dev/null | tr -d '"')
fi
if [ -z "$dp" ]; then
  if [ -d /sys/module/openvswitch ]; then dp=system; else dp=netdev; fi
fi
sysid=$(vsctl get open . external_ids:system-id 2>/dev/null | tr -d '"' || true)
[ -n "$sysid" ] || sysid=$NODE_NAME
# The tunnel endpoint osd chose for this node (on the userspace datapath, the
# address of its OVS bridge br-phy), else the node's address.
encap=$(vsctl --if-exists get open . external_ids:osd-encap-ip 2>/dev/null | tr -d '"' || true)
[ -n "$encap" ] || encap=$NODE_IP
vsctl set open . \
  external_ids:system-id="$sysid" \
  external_ids:hostname="$NODE_NAME" \
  external_ids:ovn-remote="ssl:$sb:{{ .Values.ports.sb }}" \
  external_ids:ovn-encap-type={{ .Values.controller.encapType }} \
  external_ids:ovn-encap-ip="$encap" \
  external_ids:ovn-bridge-datapath-type="$dp"
if [ "$GATEWAY" = enabled ] && vsctl br-exists br-ex; then
  vsctl set open . external_ids:ovn-bridge-mappings={{ .Values.controller.bridgeMappings | quote }} \
    external_ids:ovn-cms-options=enable-chassis-as-gw
else
  vsctl remove open . external_ids ovn-bridge-mappings -- remove open . external_ids ovn-cms-options || true
fi
# The chassis certificate osd keeps for this host (common name: the system-id).
tls=/etc/ovn/chassis
i=0
until [ -s $tls/chassis.crt ] && [ -s $tls/chassis.key ] && [ -s $tls/ca.crt ]; do
  i=$((i+1)); [ "$((i % 30))" -ne 1 ] || echo "waiting for osd to issue this chassis' certificate in {{ .Values.tls.chassisCertDir }}"
  sleep 2
done
echo "chassis $sysid ($NODE_NAME) encap $encap datapath $dp, SB ssl:$sb:{{ .Values.ports.sb }}"
exec ovn-controller unix:$sock \
  --private-key=$tls/chassis.key --certificate=$tls/chassis.crt --ca-cert=$tls/ca.crt \
  --pidfile=/run/ovn/ovn-controller.pid \
  -vconsole:info -vfile:off
{{ end -}}
