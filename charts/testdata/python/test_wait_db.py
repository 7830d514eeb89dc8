import os, tempfile, unittest

from osdtest import load

wait_db = load("osd-lib", "wait_db")
nova_wait_db = load("nova", "wait_db")
neutron_wait_db = load("neutron", "wait_db")
wait_conductor = load("nova", "wait_conductor")


class WaitDB(unittest.TestCase):
    def test_assigned(self):
        src = 'revision = "abc"\ndown_revision: str = "def"\nother = 1\nx = f()\n'
        self.assertEqual(wait_db.assigned(src, ("revision", "down_revision")), {"revision": "abc", "down_revision": "def"})

    def test_alembic_heads(self):
        sources = [
            ("1_a.py", 'revision = "a"\ndown_revision = None\n'),
            ("2_b.py", 'revision = "b"\ndown_revision = "a"\n'),
            ("3_c.py", 'revision = "c"\ndown_revision = "a"\n'),  # a branch: two heads
            ("4_m.py", 'revision = "m"\ndown_revision = ("b", "c")\n'),  # a merge
            ("5_x.py", 'revision = "x"\ndown_revision = "m"\n'),
        ]
        for n, want in ((3, {"b", "c"}), (5, {"x"})):
            got, query = wait_db.wanted("alembic", sources[:n])
            self.assertEqual(got, want, sources[:n])
            self.assertEqual(query, "SELECT version_num FROM alembic_version")

    def test_migrate_heads(self):
        got, query = wait_db.wanted("migrate", [("071_a.py", ""), ("073_c.py", ""), ("072_b.py", ""), ("README.py", "")])
        self.assertEqual((got, query), ({"73"}, "SELECT version FROM migrate_version"))
        self.assertEqual(wait_db.wanted("migrate", [])[0], set())

    def test_unknown_kind(self):
        with self.assertRaises(SystemExit) as e:
            wait_db.wanted("liquibase", [])
        self.assertIn("unknown schema kind", str(e.exception))

    def test_connection(self):
        with tempfile.TemporaryDirectory() as d:
            conf = os.path.join(d, "x.conf")
            with open(conf, "w") as f:
                f.write("[database]\nconnection = mysql+pymysql://u:%(p)s@db/x\n[empty]\n")
            self.assertEqual(wait_db.connection(conf, "database"), "mysql+pymysql://u:%(p)s@db/x")
            with self.assertRaises(SystemExit) as e:
                wait_db.connection(conf, "empty")
            self.assertIn("has no [empty] connection", str(e.exception))
            self.assertNotIn("pymysql", str(e.exception))


class NovaWaitDB(unittest.TestCase):
    def test_behind(self):
        heads = {"api": "a2", "main": "m2"}
        self.assertEqual(nova_wait_db.behind(heads, {"api": "a2", "main": "m2"}), [])
        self.assertEqual(nova_wait_db.behind(heads, {"api": "a1", "main": "m2"}), ["nova api database at a1, want a2"])
        self.assertEqual(len(nova_wait_db.behind(heads, {"api": "none (x)", "main": None})), 2)

    def test_conductor_imports_lazily(self):
        # Importable without nova and oslo: they are imported by main() only.
        self.assertTrue(callable(wait_conductor.main))


class NeutronWaitDB(unittest.TestCase):
    def test_heads_and_verdict(self):
        with tempfile.TemporaryDirectory() as d:
            for f, v in (("EXPAND_HEAD", "e1\n"), ("CONTRACT_HEAD", "c1\n")):
                with open(os.path.join(d, f), "w") as h:
                    h.write(v)
            want = neutron_wait_db.heads(d)
        self.assertEqual(want, {"e1", "c1"})
        self.assertIsNone(neutron_wait_db.verdict(want, {"e1", "c1", "old"}))
        self.assertIn("at e1, want c1 e1", neutron_wait_db.verdict(want, {"e1"}))
        self.assertIn("at no schema", neutron_wait_db.verdict(want, set()))

    def test_no_single_quote(self):
        # The program travels inside single quotes of the step's shell script.
        with open(neutron_wait_db.__file__) as f:
            self.assertNotIn("'", f.read())


if __name__ == "__main__":
    unittest.main()
