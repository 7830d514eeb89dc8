# Waits until nova-conductor answers a ping on RabbitMQ (the ping nova-compute itself sends
# before it registers: nova's BaseAPI on the conductor topic), 5 s per try, for up to
# 30 minutes.
import sys, time


def main():
    import oslo_messaging
    from nova import baserpc, config, context
    from nova.conductor import rpcapi
    config.parse_args(["nova-wait-conductor", "--config-file", "/etc/nova/nova.conf"], configure_db=False)
    conductor = baserpc.BaseAPI(topic=rpcapi.RPC_TOPIC)
    began = time.monotonic()
    while True:
        try:
            conductor.ping(context.get_admin_context(), "osd", timeout=5)
            break
        except oslo_messaging.MessagingTimeout:
            waited = time.monotonic() - began
            if waited > 1800:
                sys.exit("nova-conductor has not answered on RabbitMQ for %d s: is the nova-conductor Deployment running?" % waited)
            print("nova-conductor does not answer yet (%d s): waiting" % waited, flush=True)
    print("nova-conductor answered after %d s" % (time.monotonic() - began))


if __name__ == "__main__":
    main()
