# Waits until nova's API and cell databases are at the newest schema of the image's nova
# (alembic heads), i.e. until the nova-init Job's db syncs are done: one process that
# imports nova once and reads each database's alembic_version every 2 s (a fresh connection
# each time) for up to 30 minutes. _find_alembic_conf is nova 26's own helper.
import sys, time


def behind(heads, at):
    """What is not at its head yet, for the databases' current revisions at."""
    return ["nova %s database at %s, want %s" % (db, at[db], heads[db]) for db in ("api", "main") if at[db] != heads[db]]


def main():
    import sqlalchemy
    from alembic import script
    from alembic.runtime.migration import MigrationContext
    import nova.conf
    from nova import config
    from nova.db import migration
    config.parse_args(["nova-wait-db", "--config-file", "/etc/nova/nova.conf"], configure_db=False, init_rpc=False)
    urls = {"api": nova.conf.CONF.api_database.connection, "main": nova.conf.CONF.database.connection}
    heads = {db: script.ScriptDirectory.from_config(migration._find_alembic_conf(db)).get_current_head() for db in urls}

    def current(db):
        engine = None
        try:
            engine = sqlalchemy.create_engine(urls[db], poolclass=sqlalchemy.pool.NullPool)
            with engine.connect() as conn:
                return MigrationContext.configure(conn).get_current_revision()
        except Exception as e:  # the database or MariaDB not there yet; never print the URL
            return "none (%s)" % (getattr(e, "orig", None) or type(e).__name__)
        finally:
            if engine is not None:
                engine.dispose()

    began, next_note = time.monotonic(), 0
    while True:
        late = behind(heads, {db: current(db) for db in ("api", "main")})
        if not late:
            break
        waited = time.monotonic() - began
        if waited > 1800:
            sys.exit("%s after %d s: the nova-init Job did not migrate them" % ("; ".join(late), waited))
        if waited >= next_note:
            print("%s: waiting for the nova-init Job" % "; ".join(late), flush=True)
            next_note = waited + 30
        time.sleep(2)
    print("nova databases at %s and %s" % (heads["api"], heads["main"]))


if __name__ == "__main__":
    main()
