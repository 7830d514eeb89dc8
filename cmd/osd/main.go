package main

import _ "github.com/osdcloud/osd/daemon/k3s"

func main() {}
