import { lookup as dnsLookup } from "node:dns/promises";
import type { LookupFunction } from "node:net";
import ipaddr from "ipaddr.js";
import { ToolRefusal } from "./paths.js";

type IP = ipaddr.IPv4 | ipaddr.IPv6;

export interface ResolvedAddress {
  address: string;
  family: number;
}

export type HostLookup = (hostname: string) => Promise<ResolvedAddress[]>;

export const systemLookup: HostLookup = (hostname) => dnsLookup(hostname, { all: true, verbatim: true });

const RANGE_WORDS: Record<string, string> = {
  loopback: "a loopback address",
  unspecified: "an unspecified address",
  private: "a private-network address",
  carrierGradeNat: "a carrier-grade NAT address",
  linkLocal: "a link-local address (where cloud metadata services live)",
  uniqueLocal: "a unique-local address",
  multicast: "a multicast address",
  broadcast: "the broadcast address",
  reserved: "a reserved address",
};

const NAT64_WELL_KNOWN = ipaddr.parseCIDR("64:ff9b::/96");

/**
 * The IPv4 address a socket would really reach behind an IPv4-mapped or well-known NAT64 form,
 * so that ::ffff:127.0.0.1 is judged as 127.0.0.1 and a public site behind DNS64 stays reachable.
 */
function effective(ip: IP): IP {
  if (ip.kind() !== "ipv6") return ip;
  const v6 = ip as ipaddr.IPv6;
  if (v6.isIPv4MappedAddress()) return v6.toIPv4Address();
  if (v6.match(NAT64_WELL_KNOWN)) {
    const [high, low] = v6.parts.slice(6) as [number, number];
    return new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff]);
  }
  return v6;
}

function parseIP(text: string): IP | undefined {
  const bare = text.startsWith("[") && text.endsWith("]") ? text.slice(1, -1) : text;
  return ipaddr.isValid(bare) ? ipaddr.parse(bare) : undefined;
}

/**
 * Decides which hosts web_fetch may reach: public unicast addresses, plus the host names and
 * addresses (or CIDR ranges) opened in the allow-list. Names are judged by every address they
 * resolve to, and the caller connects to exactly the addresses returned (see pinnedLookup), so
 * a name cannot pass the check with one address and connect to another.
 */
export class AddressPolicy {
  private readonly names = new Set<string>();
  private readonly ranges: [IP, number][] = [];

  constructor(allowHosts: readonly string[]) {
    for (const entry of allowHosts) {
      const text = entry.trim().toLowerCase();
      if (ipaddr.isValidCIDR(text)) {
        const [ip, bits] = ipaddr.parseCIDR(text);
        this.ranges.push([ip, bits]);
        continue;
      }
      const ip = parseIP(text);
      if (!ip) {
        this.names.add(withoutTrailingDot(text));
        continue;
      }
      const target = effective(ip);
      this.ranges.push([target, target.kind() === "ipv4" ? 32 : 128]);
    }
  }

  /** The checked addresses of `url`'s host; throws a ToolRefusal naming the first refused one. */
  async resolve(url: URL, lookup: HostLookup): Promise<ResolvedAddress[]> {
    const literal = parseIP(url.hostname);
    if (literal) {
      const refusal = this.refusal(literal);
      if (refusal) throw new ToolRefusal(`refused to fetch ${url.href}: ${describe(literal)} is ${refusal}. ${HINT}`);
      return [{ address: literal.toString(), family: literal.kind() === "ipv4" ? 4 : 6 }];
    }

    const name = withoutTrailingDot(url.hostname);
    const addresses = await lookup(url.hostname);
    if (addresses.length === 0) throw new Error(`could not resolve "${url.hostname}": no address found`);
    if (this.names.has(name)) return addresses;
    for (const { address } of addresses) {
      const ip = parseIP(address);
      const refusal = ip ? this.refusal(ip) : "not an IP address";
      if (refusal) {
        const what = ip ? describe(ip) : `"${address}"`;
        throw new ToolRefusal(`refused to fetch ${url.href}: "${url.hostname}" resolves to ${what}, ${refusal}. ${HINT}`);
      }
    }
    return addresses;
  }

  /** Why `ip` may not be reached, or undefined when it may. */
  private refusal(ip: IP): string | undefined {
    const target = effective(ip);
    if (this.ranges.some(([base, bits]) => base.kind() === target.kind() && target.match(base, bits))) return undefined;
    const range = target.range();
    if (range === "unicast") return undefined;
    return RANGE_WORDS[range] ?? `a special-purpose address (${range})`;
  }
}

const HINT = "web_fetch only reaches public addresses; tools.web.allow_hosts in the config can open a host";

function describe(ip: IP): string {
  const target = effective(ip);
  return target === ip ? ip.toString() : `${ip.toString()} (${target.toString()})`;
}

function withoutTrailingDot(name: string): string {
  return name.endsWith(".") ? name.slice(0, -1) : name;
}

/** A socket lookup that answers with the already-checked addresses instead of asking DNS again. */
export function pinnedLookup(addresses: readonly ResolvedAddress[]): LookupFunction {
  return (_hostname, options, callback) => {
    const first = addresses[0]!;
    if (options.all)
      callback(
        null,
        addresses.map(({ address, family }) => ({ address, family })),
      );
    else callback(null, first.address, first.family);
  };
}
