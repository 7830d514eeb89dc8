package ovsdb

import "github.com/ovn-org/libovsdb/model"

// Table names in the Open_vSwitch database schema.
const (
	tableOpenvSwitch = "Open_vSwitch"
	tableBridge      = "Bridge"
	tablePort        = "Port"
	tableInterface   = "Interface"
)

// OpenvSwitch is the subset of the Open_vSwitch table (the single root row) that osd uses.
type OpenvSwitch struct {
	UUID        string            `ovsdb:"_uuid"`
	Bridges     []string          `ovsdb:"bridges"`
	ExternalIDs map[string]string `ovsdb:"external_ids"`
	OtherConfig map[string]string `ovsdb:"other_config"`
	NextCfg     int               `ovsdb:"next_cfg"`
	CurCfg      int               `ovsdb:"cur_cfg"`
}

// Bridge is the subset of the Bridge table that osd uses.
type Bridge struct {
	UUID         string            `ovsdb:"_uuid"`
	Name         string            `ovsdb:"name"`
	Ports        []string          `ovsdb:"ports"`
	DatapathType string            `ovsdb:"datapath_type"`
	ExternalIDs  map[string]string `ovsdb:"external_ids"`
	OtherConfig  map[string]string `ovsdb:"other_config"`
}

// Port is the subset of the Port table that osd uses.
type Port struct {
	UUID        string            `ovsdb:"_uuid"`
	Name        string            `ovsdb:"name"`
	Interfaces  []string          `ovsdb:"interfaces"`
	ExternalIDs map[string]string `ovsdb:"external_ids"`
}

// Interface is the subset of the Interface table that osd uses.
type Interface struct {
	UUID        string            `ovsdb:"_uuid"`
	Name        string            `ovsdb:"name"`
	Type        string            `ovsdb:"type"`
	OFPort      *int              `ovsdb:"ofport"`
	Error       *string           `ovsdb:"error"`
	ExternalIDs map[string]string `ovsdb:"external_ids"`
}

// DatabaseModel returns the client model for the Open_vSwitch database
// restricted to the four tables above.
func DatabaseModel() (model.ClientDBModel, error) {
	return model.NewClientDBModel("Open_vSwitch", map[string]model.Model{
		tableOpenvSwitch: &OpenvSwitch{},
		tableBridge:      &Bridge{},
		tablePort:        &Port{},
		tableInterface:   &Interface{},
	})
}
