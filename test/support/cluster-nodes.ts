import { mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * A cluster node's folder, as on a machine of its own: countd.yaml joining the cluster at `redis`
 * as `node` (with `settings`, more lines of countd.yaml), and jobs/ with `jobs` (name → text).
 */
export async function nodeFolder(redis: string, node: string, jobs: Record<string, string>, settings: string[] = []): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), `countd-${node}-`));
  const config = ["runner:", "  shutdown_grace: 2s", "tools:", "  exec:", "    sandbox: none", ...settings, "cluster:", `  redis: ${redis}`, `  node: ${node}`, ""];
  await writeFile(join(dir, "countd.yaml"), config.join("\n"));
  await mkdir(join(dir, "jobs"));
  for (const [name, text] of Object.entries(jobs)) await writeFile(join(dir, "jobs", `${name}.yaml`), text);
  return dir;
}
