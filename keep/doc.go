// Package keep reads and writes a RAET road keep: the on-disk record of the
// local estate, its secret keys, the remote estates it has joined and the
// acceptance status and public keys of each remote role. The layout and the
// bytes of every file are those of the Python reference (raet 0.6.9
// RoadKeep), so a keep directory written by either side loads in the other:
//
//	<dir>/local/estate.json              LocalEstate
//	<dir>/remote/estate.<name>.json      RemoteEstate, one per remote name
//	<dir>/role/local/role.json           LocalRole (sighex, prihex: secret)
//	<dir>/role/remote/role.<role>.json   RemoteRole, one per remote role
//	<dir>/uid/<uid>                      the name of the remote estate of that uid
//
// The uid index (uid/) is ours: the reference neither reads nor writes it
// (it lists only local, remote and role), and every lookup through it
// (LoadRemoteUID) checks the estate file it names, so an entry missing or
// stale is as none, and ReindexUIDs mends the index from the estate files.
// A road stack finds a remote it forgot through it, by the uid the
// remote's packets name, and so holds nothing in memory for it. An entry
// holds the name alone (no newline).
//
// Each file of the reference's layout is a JSON object written as Python's json.dump(obj, indent=2)
// writes it: keys in the reference's order, one per line with a two-space
// indent, ": " after each key, "," ending every item but the last, lists such
// as ha spread one item per line, None as null, every character outside
// printable ASCII escaped as \uXXXX, and no trailing newline.
//
// # Reading
//
// A file is accepted only if it is valid UTF-8 holding exactly one JSON
// object whose field set is exactly the expected one (no field missing, none
// extra, none repeated) and whose values have the expected types and ranges.
// A file that fails is never deleted (the reference deletes it): it is renamed
// aside to "<file>.corrupt.<n>", n being the smallest positive integer not in
// use, and the load returns a *FileError that names the path, the problem and
// where the file went; errors.Is(err, ErrCorrupt) reports it. The reference
// ignores the renamed files, because their extension is no longer .json.
// A file that does not exist gives a *FileError wrapping fs.ErrNotExist.
//
// # Writing
//
// Every write is atomic: the new content goes to a temporary file
// ".raet-keep-*.tmp" in the same directory, which is synced, renamed over the
// target, and the directory is then synced. A crash leaves either the old or
// the new file, never a partial one; a leftover temporary file is ignored by
// every read and listing and removed by the next Open. Files are created with
// mode 0600 and directories with 0700. Names and roles must be usable as one
// path element: a name that is empty, ".", "..", longer than MaxNameLen bytes,
// or that contains a space, a path separator, a NUL or another control
// character is refused with ErrInvalidName.
//
// # Writing behind
//
// A Writer (Keep.StartWriter) makes the same atomic writes on a goroutine
// of its own, for a caller that must not wait for the disk (a road stack's
// owner goroutine): it batches what has queued up, makes the batch's data
// durable with one sync, renames in queue order and syncs each directory
// once, so a process killed at any point leaves a prefix of the writes.
// Each write returns a *Queued to wait on before acknowledging what
// depends on it; the queue is bounded and a full one refuses at once. A
// road stack with a keep writes it this way.
//
// # Acceptance
//
// StatusRole applies the reference's acceptance policy (see Decide) to the keys
// a remote offers for a role, under the keep's AutoMode (AutoNever unless
// configured), and records the outcome; Accept, Reject and Pend are the
// operator's overrides.
//
// A Keep is safe for concurrent use by the goroutines of one process. One
// stack owns a keep directory at a time: a stack takes it with Keep.Lock
// (an advisory lock of the file .raet-lock, which the reference ignores),
// and a second stack on the same directory fails with ErrLocked. The
// operator's reads and acceptance changes take no lock.
package keep
