import unittest

from osdtest import load

volume_type = load("cinder", "volume_type")


class VolumeType(unittest.TestCase):
    def test_endpoint(self):
        catalog = [
            {"type": "identity", "endpoints": [{"interface": "internal", "url": "http://k/"}]},
            {"type": "volumev3", "endpoints": [
                {"interface": "public", "url": "http://pub/v3/p", "region_id": "RegionOne"},
                {"interface": "internal", "url": "http://other/v3/p", "region_id": "RegionTwo"},
                {"interface": "internal", "url": "http://int/v3/p/", "region_id": "RegionOne"},
            ]},
        ]
        self.assertEqual(volume_type.volume_endpoint(catalog, "RegionOne"), "http://int/v3/p")
        self.assertEqual(volume_type.volume_endpoint(catalog, "RegionTwo"), "http://other/v3/p")
        self.assertIsNone(volume_type.volume_endpoint(catalog, "RegionThree"))
        self.assertIsNone(volume_type.volume_endpoint(catalog[:1], "RegionOne"))

    def test_decide(self):
        ceph = {"id": "1", "name": "ceph", "extra_specs": {"volume_backend_name": "ceph"}}
        bare = {"id": "2", "name": "lvm", "extra_specs": None}
        self.assertEqual(volume_type.decide([], "ceph", "ceph"), ("create", None))
        self.assertEqual(volume_type.decide([bare], "ceph", "ceph"), ("create", None))
        self.assertEqual(volume_type.decide([ceph, bare], "ceph", "ceph"), ("exists", ceph))
        self.assertEqual(volume_type.decide([ceph, bare], "lvm", "lvm"), ("set-spec", bare))
        self.assertEqual(volume_type.decide([ceph], "ceph", "rbd"), ("set-spec", ceph))


if __name__ == "__main__":
    unittest.main()
