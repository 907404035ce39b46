/*
 * countd's layers, checked by `npm run lint:deps`; docs/architecture.md
 * ("Layers") says the same in prose. Only src/ is cruised: tests and benches may import anything.
 *
 * The stages, top to bottom; each may import the stages below it, never one above:
 *   cli → daemon → core → backend → console → rehearse → triggers → cluster → runner → runtime → delivery → agent → tools → providers
 * Below them all lies the foundation (configuration, jobs, state on disk, sessions, audit, memory,
 * skills, the HTML worker and the small shared modules), which any stage may import. The
 * foundation never imports the stages that orchestrate a run (cli, daemon, console, rehearse, triggers, cluster, runner, runtime):
 * it may read the schemas and types of delivery, agent, tools and providers, because each of those
 * stages owns the description of its own settings, which config/ and jobs/ compose.
 */
const stages = [
  { name: "cli", path: "^src/(cli/|cli\\.ts$)" },
  { name: "daemon", path: "^src/daemon\\.ts$" },
  { name: "core", path: "^src/core\\.ts$" },
  { name: "backend", path: "^src/backend/" },
  { name: "console", path: "^src/console/" },
  { name: "rehearse", path: "^src/rehearse/" },
  { name: "triggers", path: "^src/triggers/" },
  { name: "cluster", path: "^src/cluster/" },
  { name: "runner", path: "^src/runner/" },
  { name: "runtime", path: "^src/runtime\\.ts$" },
  { name: "delivery", path: "^src/delivery/" },
  { name: "agent", path: "^src/agent/" },
  { name: "tools", path: "^src/tools/" },
  { name: "providers", path: "^src/providers/" },
];

const orchestration = ["cli", "daemon", "core", "backend", "console", "rehearse", "triggers", "cluster", "runner", "runtime"].map(
  (name) => stages.find((stage) => stage.name === name).path,
);

const foundation =
  "^src/(config|jobs|store|sessions|audit|memory|skills|html|types)/|^src/(text|time|timers|log|events|inside|package)\\.ts$";

const upward = stages.slice(1).map((stage, index) => ({
  name: `${stage.name}-imports-upward`,
  comment: `${stage.name} sits below ${stages
    .slice(0, index + 1)
    .map((above) => above.name)
    .join(", ")} in the flow and may not import them`,
  severity: "error",
  from: { path: stage.path },
  // The shared backend implements the contract the backend stage declares: it may read its types.
  to:
    stage.name === "cluster"
      ? { path: stages.slice(0, index + 1).map((above) => above.path), pathNot: "^src/backend/types\\.ts$" }
      : { path: stages.slice(0, index + 1).map((above) => above.path) },
}));

module.exports = {
  forbidden: [
    {
      name: "no-circular",
      comment: "An import cycle ties modules so neither can change, load or be tested alone",
      severity: "error",
      from: {},
      to: { circular: true },
    },
    ...upward,
    {
      name: "backend-chosen-once",
      comment:
        "Whether daemons share a backend is decided in src/backend/open.ts alone: nothing else reaches src/cluster/, so one code path serves one daemon and many",
      severity: "error",
      from: { path: "^src/", pathNot: "^src/(cluster/|backend/open\\.ts$)" },
      to: { path: "^src/cluster/" },
    },
    {
      name: "cluster-reads-backend-types-only",
      comment: "The shared backend may read the backend's contract, never its code",
      severity: "error",
      from: { path: "^src/cluster/" },
      to: { path: "^src/backend/types\\.ts$", dependencyTypesNot: ["type-only"] },
    },
    {
      name: "foundation-imports-orchestration",
      comment: "The foundation is imported by every stage, so it may not depend on how a run is orchestrated",
      severity: "error",
      from: { path: foundation },
      to: { path: orchestration },
    },
  ],
  options: {
    includeOnly: "^src/",
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    doNotFollow: { path: "node_modules" },
  },
};
