#!/bin/bash
# Runs the scripts and configuration files rendered from the charts against the real Debian
# packages of a rootfs: MariaDB (fresh datadir, restart), memcached, RabbitMQ, and Keystone's
# steps (db-create twice, config-render, db_sync, bootstrap twice) and uwsgi API, then issues
# tokens. Called by TestChartsInDebianRootfs inside `unshare -n -m -p -f --mount-proc`, so
# every mount and process is private and goes away with the namespace; the rootfs itself is
# never written (an overlay on a scratch directory takes the changes).
# Usage: check-in-rootfs.sh ROOTFS RENDERED-DIR SCRATCH-DIR
set -eu
LOWER=$1 O=$2 S=$3
R=$S/merged
mkdir -p $S/upper $S/work $R
mount -t overlay overlay -o lowerdir=$LOWER,upperdir=$S/upper,workdir=$S/work $R
ip link set lo up
mount -t proc proc $R/proc
mount --bind /dev $R/dev
for d in run var/lib/mysql var/lib/rabbitmq; do mount -t tmpfs tmpfs $R/$d; done
mkdir -p $R/run/mysqld $R/run/osd-rabbitmq $R/etc/osd/templates $R/etc/osd/config $R/etc/keystone/fernet-keys $R/etc/keystone/credential-keys
chmod 1777 $R/run/osd-rabbitmq
chroot $R chown mysql:mysql /var/lib/mysql /run/mysqld
chroot $R chown rabbitmq:rabbitmq /var/lib/rabbitmq
echo "127.0.0.1 mariadb mariadb.openstack.svc memcached.openstack.svc keystone-api.openstack.svc keystone-api" >> $R/etc/hosts
hex() { head -c32 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
ROOTPW=$(hex) DBPW=$(hex) RABBITPW=$(hex) COOKIE=$(hex)
ADMINPW=${ADMINPW:-$(hex)}
now() { date +%s.%N; }
since() { awk "BEGIN{printf \"%.1f\", $(now) - $1}"; }
as() { local u=$1; shift; chroot --userspec=$u:$u $R env HOME=/var/lib/$u "$@"; }

t=$(now)
as mysql ROOT_PASSWORD=$ROOTPW /bin/sh -ec "$(cat $O/mariadb.sh)" > $S/mariadb.log 2>&1 &
as memcache memcached $(cat $O/memcached.args) > $S/memcached.log 2>&1 &
cp $O/rabbitmq.conf $O/rabbitmq-env.conf $R/etc/rabbitmq/
as rabbitmq RABBITMQ_PASSWORD_NOVA=$RABBITPW RABBITMQ_PASSWORD_NEUTRON=$(hex) RABBITMQ_PASSWORD_CINDER=$(hex) RABBITMQ_PASSWORD_HEAT=$(hex) ERLANG_COOKIE=$COOKIE /bin/sh -ec "$(cat $O/rabbitmq.sh)" > $S/rabbitmq.log 2>&1 &

echo "step db-create (twice: idempotent)"
for i in 1 2; do
  chroot $R env DB_HOST=mariadb DB_NAME=keystone DB_USER=keystone ROOT_PASSWORD=$ROOTPW DB_PASSWORD=$DBPW /bin/sh -ec "$(cat $O/step-db-create.sh)"
done
echo "mariadb up and keystone database created in $(since $t) s"

echo "step config-render"
cp $O/keystone.conf $O/uwsgi.ini $R/etc/osd/templates/
chroot $R env DB_PASSWORD=$DBPW /bin/sh -ec "$(cat $O/step-config-render.sh)"
if grep -q @@ $R/etc/osd/config/*; then echo "FAIL: a placeholder is left"; exit 1; fi
grep -q "keystone:$DBPW@" $R/etc/osd/config/keystone.conf || { echo "FAIL: password not rendered"; exit 1; }
cp $R/etc/osd/config/keystone.conf $R/etc/keystone/keystone.conf
cp $R/etc/osd/config/uwsgi.ini $R/etc/keystone/uwsgi-osd.ini
# Key repositories as osd generates them (deploy.FormatFernet), readable by the group only.
for d in fernet-keys credential-keys; do
  for k in 0 1; do python3 -c 'import base64,os; print(base64.urlsafe_b64encode(os.urandom(32)).decode(), end="")' > $R/etc/keystone/$d/$k; done
  chroot $R chgrp -R keystone /etc/keystone/$d; chmod 0440 $R/etc/keystone/$d/*
done
chroot $R chgrp keystone /etc/keystone/keystone.conf /etc/keystone/uwsgi-osd.ini
chmod 0640 $R/etc/keystone/keystone.conf /etc/keystone/uwsgi-osd.ini 2>/dev/null || chmod 0640 $R/etc/keystone/keystone.conf $R/etc/keystone/uwsgi-osd.ini

t=$(now)
as keystone $(cat $O/step-db-sync.args) > $S/db-sync.log 2>&1 || { tail -20 $S/db-sync.log; echo "FAIL: db_sync"; exit 1; }
echo "step db-sync: $(since $t) s"
t=$(now)
for i in 1 2; do
  as keystone OS_BOOTSTRAP_PASSWORD=$ADMINPW $(cat $O/step-bootstrap.args) > $S/bootstrap.log 2>&1 || { tail -20 $S/bootstrap.log; echo "FAIL: bootstrap"; exit 1; }
done
echo "step bootstrap (twice): $(since $t) s"

t=$(now)
as keystone $(cat $O/keystone.args) > $S/uwsgi.log 2>&1 &
for i in $(seq 1 90); do
  chroot $R python3 -c 'import urllib.request; urllib.request.urlopen("http://127.0.0.1:5000/v3", timeout=2)' 2>/dev/null && break
  sleep 1
done
echo "keystone API answering in $(since $t) s"
export OS_AUTH_URL=http://127.0.0.1:5000/v3 OS_USERNAME=admin OS_PASSWORD=$ADMINPW OS_PROJECT_NAME=admin \
  OS_USER_DOMAIN_NAME=Default OS_PROJECT_DOMAIN_NAME=Default OS_IDENTITY_API_VERSION=3
chroot $R openstack token issue -f value -c id >/dev/null || { tail -30 $S/uwsgi.log; echo "FAIL: openstack token issue"; exit 1; }
echo "openstack token issue: ok"
if [ -f $O/clouds.yaml ]; then
  cp $O/clouds.yaml $R/tmp/clouds.yaml
  env -u OS_AUTH_URL -u OS_USERNAME -u OS_PASSWORD -u OS_PROJECT_NAME -u OS_USER_DOMAIN_NAME -u OS_PROJECT_DOMAIN_NAME \
    OS_CLIENT_CONFIG_FILE=/tmp/clouds.yaml OS_CLOUD=osd chroot $R openstack token issue -f value -c id >/dev/null \
    || { echo "FAIL: token issue with clouds.yaml"; exit 1; }
  echo "openstack token issue with osd's clouds.yaml: ok"
fi
chroot $R openstack --os-interface internal endpoint list -f value -c Interface -c URL | sort
chroot $R python3 - <<'PY'
import json, os, time, urllib.request
body = json.dumps({"auth": {"identity": {"methods": ["password"], "password": {"user": {"name": "admin",
  "domain": {"name": "Default"}, "password": os.environ["OS_PASSWORD"]}}},
  "scope": {"project": {"name": "admin", "domain": {"name": "Default"}}}}}).encode()
lat = []
for i in range(100):
    t = time.time()
    req = urllib.request.Request(os.environ["OS_AUTH_URL"] + "/auth/tokens", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 201 and r.headers["X-Subject-Token"]
    lat.append(time.time() - t)
lat.sort()
print("token issue over 100 requests: p50 %.0f ms, p99 %.0f ms" % (lat[49] * 1000, lat[98] * 1000))
PY
echo "keystone uwsgi RSS: $(ps -o rss= -C uwsgi | awk '{s+=$1} END {printf "%.0f", s/1024}') MiB"

for i in $(seq 1 90); do
  as rabbitmq $(cat $O/rabbitmq.probe.shell) -c "$(cat $O/rabbitmq.probe)" >/dev/null 2>&1 && break
  sleep 1
done
as rabbitmq $(cat $O/rabbitmq.probe.shell) -c "$(cat $O/rabbitmq.probe)" >/dev/null || { tail -20 $S/rabbitmq.log; echo "FAIL: rabbitmq readiness"; exit 1; }
as rabbitmq rabbitmqctl -q list_users | grep -q '^nova' || { echo "FAIL: rabbitmq user"; exit 1; }
as rabbitmq rabbitmqctl -q list_users | grep -q '^openstack' && { echo "FAIL: the shared user openstack is still there"; exit 1; }
as rabbitmq rabbitmqctl -q authenticate_user nova "$RABBITPW" >/dev/null || { echo "FAIL: rabbitmq user nova does not authenticate with its password"; exit 1; }
perms=$(as rabbitmq rabbitmqctl -s list_user_permissions nova | tr -s ' \t' ' ')
[ "$perms" = "nova .* .* .*" ] || { echo "FAIL: nova's permissions: $perms, want .* in vhost nova only"; exit 1; }
echo "rabbitmq ready with users nova, neutron, cinder, heat (each in its own vhost)"
chroot $R mysqladmin --connect-timeout=3 ping >/dev/null
echo "ALL OK"
