package test

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/mattn/go-sqlite3"
)

func init() { registerE2E("secrets at rest", stageCheck, checkSecretsAtRest) }

// checkSecretsAtRest: the cloud's Secrets (database passwords, fernet keys) are encrypted in
// the k3s datastore (kine's SQLite table): the newest revision of every Secret in the
// openstack namespace starts with the aescbc envelope, and none holds the admin password.
func checkSecretsAtRest(t *testing.T, n *node) {
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(n.stateDir, "k3s", "server", "db", "state.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT k.name, k.value FROM kine k
		JOIN (SELECT name, MAX(id) AS id FROM kine WHERE name LIKE '/registry/secrets/openstack/%' GROUP BY name) m ON k.id = m.id
		WHERE k.deleted = 0`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	_, password := n.adminCredentials(t)
	count := 0
	for rows.Next() {
		var name string
		var value []byte
		if err := rows.Scan(&name, &value); err != nil {
			t.Fatal(err)
		}
		count++
		if !strings.HasPrefix(string(value), "k8s:enc:aescbc:v1:") {
			t.Errorf("secret %s is stored as %.20q..., want encrypted (k8s:enc:aescbc:v1:)", name, value)
		}
		if strings.Contains(string(value), password) {
			t.Errorf("secret %s holds the admin password in clear in the datastore", name)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if count < 5 {
		t.Errorf("found %d Secrets of the openstack namespace in the datastore, want the cloud's (at least 5)", count)
	}
}
