// The rooms of src/ and the floors they stand on (docs/design.md, "Rooms and floors"). A room
// imports only rooms on its own floor or below, never one above, and nothing imports in a circle: a
// change to a lower room then never needs a higher one, and each room can be read without the ones
// above it.
/** Floors from the ground up; a room may import rooms of its floor or lower floors. */
const floors = [
  ['selectors', 'log', 'maybe.ts', 'within.ts'],
  ['api'],
  ['http', 'store'],
  ['upstream', 'flow', 'represent'],
  ['auth', 'reflector', 'watch', 'metrics'],
  ['cache', 'discovery'],
  ['serve'],
  ['config', 'gateway.ts', 'cli.ts', 'nodeflags.ts', 'heaptrim.ts', 'workers.ts', 'worker.ts'],
];

const room = (r) => (r.endsWith('.ts') ? `src/${r.replace('.', '\\.')}$` : `src/${r}/`);

const above = (i) => floors.slice(i + 1).flat().map(room);

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'Modules that import each other in a circle cannot be understood, tested or changed one at a time.',
      from: { path: '^src/' },
      to: { circular: true },
    },
    ...floors.flatMap((rooms, i) =>
      i === floors.length - 1
        ? []
        : rooms.map((r) => ({
            name: `floor-${r}`,
            severity: 'error',
            comment: `${r} stands on floor ${i}; it may not import a room above it.`,
            from: { path: room(r) },
            to: { path: above(i) },
          })),
    ),
    {
      name: 'not-in-a-floor',
      severity: 'error',
      comment: 'Every room of src/ has its floor; a new room is added to the list above.',
      from: { path: '^src/' },
      to: { path: '^src/', pathNot: floors.flat().map(room) },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    includeOnly: '^src/',
  },
};
