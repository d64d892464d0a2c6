//go:build !linux

package keep

func defaultSyncer() syncer { return fileSyncer{} }
