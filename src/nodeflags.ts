// The V8 flags Levee runs with; `levee` (its shebang), the container entrypoint, `npm start` and
// the tests all start Node with these.
//
// A gateway streams far more bytes than it keeps. Every network read is a fresh 64 KiB buffer that
// dies at once, but V8 frees those only when the young generation fills (16 MiB semi-spaces by
// default) or external memory passes its ~64 MiB trigger, so the process swells by tens of MB per
// large response. A 1 MiB semi-space collects them promptly. Measured while a 53 MB LIST streamed
// through: peak RSS growth +45..67 MB with the default, +9..14 MB with this flag, and 12–30 MB at
// 4 MiB. The scavenges cost CPU: serving 600 node agents' watch-lists at once (bench:massrestart,
// pinned) took Levee 1.7–1.8 s of CPU at 1 MiB against 1.4 s at 4 MiB; memory is kept first.
export const NODE_FLAGS: readonly string[] = ['--max-semi-space-size=1'];
