import { relative, resolve, sep } from "node:path";
import type { MemoryStore } from "../memory/store.js";
import type { ChatMessage, Reasoning, ToolCall } from "../providers/types.js";
import type { Skill, SkillsLoader, SkillsLoadResult } from "../skills/loader.js";
import { loadImages } from "./images.js";
import { isTimeZone } from "../time.js";
import type { PersonaConfig } from "./personalities.js";
import {
  activeSkillsSection,
  identitySection,
  memorySection,
  runtimeFacts,
  safetySection,
  skillsSummarySection,
  toolUseSection,
  type PromptSkill,
} from "./prompts.js";

export interface ContextBuilderOptions {
  workspace: string;
  memory: MemoryStore;
  skills: SkillsLoader;
  persona: PersonaConfig;
  /** IANA time zone for the runtime facts; defaults to the process's own. */
  timezone?: string;
  /** Receives each skill problem (bad front matter, missing SKILL.md), since the prompt just leaves such skills out. */
  onWarning?: (message: string) => void;
}

export interface BuildMessagesOptions {
  /** Image paths, resolved against the process's working directory. */
  media?: string[];
  now?: Date;
  /** IANA zone of `now` in the runtime facts, in place of the builder's. */
  timezone?: string;
  channel?: string;
}

export class ContextBuilder {
  private readonly workspace: string;
  private readonly timezone: string;
  private cached: { skills: SkillsLoadResult; prompt: string } | undefined;

  constructor(private readonly opts: ContextBuilderOptions) {
    this.workspace = resolve(opts.workspace);
    this.timezone = opts.timezone ?? Intl.DateTimeFormat().resolvedOptions().timeZone;
    if (!isTimeZone(this.timezone)) throw new Error(`unknown time zone "${this.timezone}" (expected an IANA name such as "Europe/Berlin")`);
  }

  /**
   * The stable part of the context: the same workspace, skills and persona give the same bytes on
   * every run, so providers' prompt caches hit. Nothing time- or run-dependent belongs here.
   */
  async buildSystemPrompt(): Promise<string> {
    const loaded = await this.opts.skills.load();
    if (this.cached?.skills !== loaded) this.cached = { skills: loaded, prompt: this.composeSystemPrompt(loaded) };
    return this.cached.prompt;
  }

  private composeSystemPrompt({ skills, problems }: SkillsLoadResult): string {
    const { persona } = this.opts;
    for (const problem of problems) this.opts.onWarning?.(problem);
    const active = skills.filter((s) => s.always).map((s) => this.promptSkill(s));
    const onDemand = skills.filter((s) => !s.always).map((s) => this.promptSkill(s));
    const sections = [
      identitySection(persona, this.workspace),
      toolUseSection(persona.locale),
      memorySection(persona.locale, this.relativePath(this.opts.memory.path)),
      safetySection(persona.locale),
    ];
    if (active.length > 0) sections.push(activeSkillsSection(persona.locale, active));
    if (onDemand.length > 0) sections.push(skillsSummarySection(persona.locale, onDemand));
    return sections.join("\n\n");
  }

  async buildMessages(history: ChatMessage[], message: string, opts: BuildMessagesOptions = {}): Promise<ChatMessage[]> {
    // Images first: a bad path must fail before anything is sent to a provider.
    const images = opts.media?.length ? await loadImages(opts.media) : [];
    const facts = runtimeFacts(this.opts.persona.locale, {
      now: opts.now ?? new Date(),
      timezone: opts.timezone ?? this.timezone,
      channel: opts.channel,
    });
    return [
      { role: "system", content: await this.buildSystemPrompt() },
      { role: "system", content: facts },
      ...history,
      { role: "user", content: images.length > 0 ? [...images, { type: "text", text: message }] : message },
    ];
  }

  addToolResult(messages: ChatMessage[], call: { id: string; name: string }, result: string, isError = false): void {
    messages.push({ role: "tool", toolCallId: call.id, name: call.name, content: result, ...(isError ? { isError } : {}) });
  }

  addAssistantMessage(messages: ChatMessage[], content: string | null, toolCalls?: ToolCall[], reasoning?: Reasoning): void {
    messages.push({
      role: "assistant",
      content,
      ...(toolCalls?.length ? { toolCalls } : {}),
      ...(reasoning ? { reasoning } : {}),
    });
  }

  private promptSkill(skill: Skill): PromptSkill {
    return { name: skill.name, description: skill.description, body: skill.body, file: this.relativePath(skill.path) };
  }

  /** Workspace-relative with "/" separators: the form the workspace-confined file tools take. */
  private relativePath(file: string): string {
    return relative(this.workspace, file).split(sep).join("/");
  }
}
