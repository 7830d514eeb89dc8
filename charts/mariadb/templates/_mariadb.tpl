{{/*
The server's start: the data directory made on first start, root over the network with the
generated password (an init file re-applied at every start), then mariadbd with
.Values.server's options and any recovery options a human left in osd-recovery-options.
*/}}
{{- define "mariadb.script" -}}
if [ ! -d /var/lib/mysql/mysql ]; then
  mysql_install_db --datadir=/var/lib/mysql --skip-test-db >/dev/null
fi
# Root over the network with the generated password (root@localhost keeps
# unix-socket authentication). Re-applied at every start: idempotent.
umask 077
cat > /run/mysqld/init.sql <<SQL
CREATE USER IF NOT EXISTS 'root'@'%' IDENTIFIED BY '$ROOT_PASSWORD';
ALTER USER 'root'@'%' IDENTIFIED BY '$ROOT_PASSWORD';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'%' WITH GRANT OPTION;
FLUSH PRIVILEGES;
SQL
unset ROOT_PASSWORD
# A damaged database is never discarded here: a human recovers it (status
# says how) and may put extra server options in osd-recovery-options, e.g.
# --innodb-force-recovery=1, to start it once more and dump what is readable.
recovery=
if [ -s /var/lib/mysql/osd-recovery-options ]; then
  recovery=$(cat /var/lib/mysql/osd-recovery-options)
  echo "osd: starting mariadbd with the recovery options in /var/lib/mysql/osd-recovery-options: $recovery (remove the file once the data is saved)"
fi
exec mariadbd --datadir=/var/lib/mysql --bind-address=0.0.0.0 --port=3306 \
  --init-file=/run/mysqld/init.sql{{ range $k, $v := .Values.server }} --{{ $k }}={{ $v }}{{ end }} $recovery
{{ end -}}
