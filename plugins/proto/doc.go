// Package proto holds the gRPC messages and services between an estate and
// its plugins, generated from raetplugin.proto (run gen.sh after an edit;
// gen.sh -check and TestGenerated fail when these files are stale). Plugin
// authors use package sdk instead, which converts to plain Go types.
package proto
