# One check of the wait-db step of neutron-server (its shell loop runs it every 5 s): exits
# 0 when the neutron database holds the expand and contract heads of the migrations in the image
# (neutron ships them as EXPAND_HEAD and CONTRACT_HEAD), else non-zero with what it has.
# This file travels inside single quotes of a shell script: it holds no single quote.
import configparser, importlib.util, os, sys


def heads(versions):
    """The expand and contract heads in the alembic versions directory."""
    out = set()
    for f in ("EXPAND_HEAD", "CONTRACT_HEAD"):
        with open(os.path.join(versions, f)) as h:
            out.add(h.read().strip())
    return out


def verdict(want, current):
    """None when the database at current has every head of want, else why not."""
    if want <= current:
        return None
    return "neutron database at %s, want %s: waiting for the neutron-init Job" % (" ".join(sorted(current)) or "no schema", " ".join(sorted(want)))


def main():
    import sqlalchemy
    versions = os.path.join(importlib.util.find_spec("neutron").submodule_search_locations[0], "db", "migration", "alembic_migrations", "versions")
    want = heads(versions)
    conf = configparser.ConfigParser(interpolation=None)
    conf.read("/etc/neutron/neutron.conf")
    try:
        with sqlalchemy.create_engine(conf["database"]["connection"]).connect() as db:
            current = {row[0] for row in db.execute(sqlalchemy.text("SELECT version_num FROM alembic_version"))}
    except sqlalchemy.exc.SQLAlchemyError as e:  # noqa: F841 (never printed: the URL)
        current = set()
    why = verdict(want, current)
    if why:
        sys.exit(why)
    print("neutron database at %s" % " ".join(sorted(current)))


if __name__ == "__main__":
    main()
