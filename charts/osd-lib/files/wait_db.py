# osd's wait for a service's database schema: polls every 2 s, in one process, until the
# database is at the newest schema of the service's code in this image (what its init Job's
# db sync makes), so that the service does not start before: started on missing tables it
# crash-loops, each restart importing the whole service again (seconds of CPU while osd
# init keeps the host busy) and the kubelet backing off longer each time.
#   argv: CONFIG_FILE SECTION SCHEMA JOB TIMEOUT_SECONDS
#   SCHEMA  alembic:PACKAGE/PATH  alembic scripts (PATH/versions/*.py): every head revision
#                                 in the alembic_version table
#           migrate:PACKAGE/PATH  a sqlalchemy-migrate repository (PATH/versions/NNN_*.py):
#                                 migrate_version at the highest NNN
# The revisions are read from the files with ast (nothing of the service is imported).
import ast, configparser, importlib.util, os, re, sys, time


def assigned(source, names):
    """The literal values assigned to names at the top of a Python file."""
    out = {}
    for node in ast.parse(source).body:
        targets = [t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)]
        if isinstance(getattr(node, "target", None), ast.Name):  # annotated: revision: str = "..."
            targets = [node.target.id]
        for t in targets:
            if t in names and getattr(node, "value", None) is not None:
                out[t] = ast.literal_eval(node.value)
    return out


def wanted(kind, sources):
    """The revisions a database at the newest schema has, and the query reading them, from
    the migration files' (name, source) pairs; exits on an unknown kind."""
    if kind == "alembic":
        revisions, parents = set(), set()
        for _, source in sources:
            v = assigned(source, ("revision", "down_revision"))
            if "revision" in v:
                revisions.add(v["revision"])
                down = v.get("down_revision")
                parents.update(down if isinstance(down, (tuple, list)) else [down] if down else [])
        return revisions - parents, "SELECT version_num FROM alembic_version"
    if kind == "migrate":
        numbers = [int(m.group(1)) for m in (re.match(r"(\d+)_\w*\.py$", f) for f, _ in sources) if m]
        return ({str(max(numbers))} if numbers else set()), "SELECT version FROM migrate_version"
    sys.exit("wait-db: unknown schema kind %r (alembic: or migrate:)" % kind)


def connection(conf_file, section):
    """The database URL of conf_file's [section]; exits when there is none."""
    conf = configparser.ConfigParser(interpolation=None, strict=False)
    conf.read(conf_file)
    url = conf.get(section, "connection", fallback=None)
    if not url:
        sys.exit("wait-db: %s has no [%s] connection" % (conf_file, section))
    return url


def main(argv):
    import sqlalchemy

    conf_file, section, schema, job, timeout = argv[1:6]
    kind, _, where = schema.partition(":")
    package, _, path = where.partition("/")
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        sys.exit("wait-db: no Python package %s in this image" % package)
    versions = os.path.join(spec.submodule_search_locations[0], path, "versions")
    files = sorted(f for f in os.listdir(versions) if f.endswith(".py") and not f.startswith("__"))
    sources = []
    for f in files:
        with open(os.path.join(versions, f)) as h:
            sources.append((f, h.read()))
    want, query = wanted(kind, sources)
    if not want:
        sys.exit("wait-db: no revisions in %s" % versions)
    url = connection(conf_file, section)

    def current():
        """The schema revisions the database has, or why they cannot be read (never the URL)."""
        engine = None
        try:
            engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool)
            with engine.connect() as db:
                return {str(row[0]) for row in db.execute(sqlalchemy.text(query))}, ""
        except Exception as e:  # MariaDB, the database or the table not there yet
            return set(), "%s" % (getattr(e, "orig", None) or type(e).__name__)
        finally:
            if engine is not None:
                engine.dispose()

    name = package  # the service: placement, heat, cinder
    began, next_note = time.monotonic(), 0
    while True:
        have, why = current()
        if want <= have:
            print("%s database at %s" % (name, " ".join(sorted(have))), flush=True)
            break
        waited = time.monotonic() - began
        at = " ".join(sorted(have)) or "no schema" + (" (%s)" % why if why else "")
        if waited > float(timeout):
            sys.exit("%s database at %s after %d s, want %s: the %s Job has not migrated it (osd status says why)" % (name, at, waited, " ".join(sorted(want)), job))
        if waited >= next_note:
            print("%s database at %s, want %s: waiting for the %s Job" % (name, at, " ".join(sorted(want)), job), flush=True)
            next_note = waited + 30
        time.sleep(2)


if __name__ == "__main__":
    main(sys.argv)
