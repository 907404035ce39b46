/** Writes schema/job.schema.json from the zod schema of job files (`npm run schema`); a test keeps it current. */
import { writeFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { jobJsonSchema } from "../src/jobs/schema.js";

const target = fileURLToPath(new URL("../schema/job.schema.json", import.meta.url));
await writeFile(target, jobJsonSchema());
console.log(`wrote ${target}`);
