{{/*
The server's start: the Erlang cookie from its Secret, the database moved aside after 3
failed starts in a row, then in the background (once the node answers) one user and vhost
per service and the removed users deleted, while the server runs in the foreground.
*/}}
{{- define "rabbitmq.script" -}}
umask 077
mkdir -p /var/lib/rabbitmq/mnesia
rm -f /var/lib/rabbitmq/.erlang.cookie
printf '%s' "$ERLANG_COOKIE" > /var/lib/rabbitmq/.erlang.cookie
chmod 0400 /var/lib/rabbitmq/.erlang.cookie
unset ERLANG_COOKIE
rm -f /run/osd-rabbitmq/users-ready
# On one node the database holds only transient RPC messages, queues the
# services declare again and the user made below: after 3 starts in a row
# that never completed, move it aside (kept, renamed) and start afresh.
# Once per run of failures: if a fresh one fails too, the cause is elsewhere.
fails=$(cat /var/lib/rabbitmq/osd-failed-starts 2>/dev/null || true)
case $fails in ''|*[!0-9]*) fails=0 ;; esac
if [ "$fails" -eq 3 ] && [ -d /var/lib/rabbitmq/mnesia/rabbit@localhost ]; then
  aside=/var/lib/rabbitmq/mnesia.broken-$(date -u +%Y%m%dT%H%M%SZ)
  mv /var/lib/rabbitmq/mnesia "$aside"
  mkdir -p /var/lib/rabbitmq/mnesia
  echo "osd: rabbitmq did not start 3 times in a row: moved its database aside to $aside and starting with an empty one (queued messages are lost; users and queues are made again)"
fi
echo $((fails + 1)) > /var/lib/rabbitmq/osd-failed-starts
(
  # await_startup fails at once while the Erlang node is not up yet: retry.
  i=0
  until rabbitmqctl -q await_startup --timeout 60 >/dev/null 2>&1; do
    i=$((i+1)); [ "$i" -lt 90 ] || { echo "rabbitmq did not start"; exit 1; }
    sleep 2
  done
  # One user and one vhost per service, the password piped to rabbitmqctl's
  # standard input (printf is the shell's builtin): never on a command line.
  # Each rabbitmqctl is an Erlang VM (about 1 s of CPU): the lists are read once.
  vhosts=$(rabbitmqctl -s list_vhosts)
  users=$(rabbitmqctl -s list_users)
  {{- range $user := .Values.users }}
  printf '%s\n' "$vhosts" | grep -qx {{ $user }} || rabbitmqctl -q add_vhost {{ $user }}
  # The password on standard input, not -q: RabbitMQ 4's rabbitmqctl never reads
  # it in quiet mode (it waits for ever); the prompt it prints goes to /dev/null.
  if printf '%s\n' "$users" | grep -q '^{{ $user }}[[:space:]]'; then
    printf '%s\n' "$RABBITMQ_PASSWORD_{{ upper $user }}" | rabbitmqctl change_password {{ $user }} >/dev/null
  else
    printf '%s\n' "$RABBITMQ_PASSWORD_{{ upper $user }}" | rabbitmqctl add_user {{ $user }} >/dev/null
  fi
  rabbitmqctl -q set_permissions -p {{ $user }} {{ $user }} ".*" ".*" ".*"
  {{- end }}
  {{- range .Values.removeUsers }}
  if printf '%s\n' "$users" | grep -q '^{{ . }}[[:space:]]'; then rabbitmqctl -q delete_user {{ . }}; fi
  {{- end }}
  rm -f /var/lib/rabbitmq/osd-failed-starts
  touch /run/osd-rabbitmq/users-ready
  echo "rabbitmq users {{ join " " .Values.users }} ready"
) &
# The server itself, not Debian's wrapper (which sends its output to /var/log).
exec /usr/lib/rabbitmq/bin/rabbitmq-server
{{ end -}}
