/**
 * The parts of mvdan-sh (GopherJS build of mvdan.cc/sh/v3/syntax) that countd uses. Node fields
 * mirror the Go structs; `syntax.NodeType(node)` names the struct, so callers narrow by it.
 */
declare module "mvdan-sh" {
  export interface Pos {
    Offset(): number;
    Line(): number;
    Col(): number;
  }
  export interface Node {
    Pos(): Pos;
    End(): Pos;
  }
  export interface Lit extends Node {
    Value: string;
  }
  export interface SglQuoted extends Node {
    Dollar: boolean;
    Value: string;
  }
  export interface DblQuoted extends Node {
    Parts: Node[];
  }
  export interface BraceExp extends Node {
    Sequence: boolean;
    Elems: Word[];
  }
  export interface Word extends Node {
    Parts: Node[];
  }
  export interface ParamExp extends Node {
    Excl: boolean;
    Param: Lit | null;
    Index: Node | null;
    Slice: { Offset: Node | null; Length: Node | null } | null;
    Repl: unknown;
    Exp: { Op: number; Word: Word | null } | null;
  }
  export interface Assign extends Node {
    Naked: boolean;
    Name: Lit | null;
    Value: Word | null;
  }
  export interface Redirect extends Node {
    Op: number;
    N: Lit | null;
    Word: Word | null;
    Hdoc: Word | null;
  }
  export interface Stmt extends Node {
    Cmd: Node | null;
    Redirs: Redirect[];
    Background: boolean;
  }
  export interface File extends Node {
    Stmts: Stmt[];
  }
  export interface CallExpr extends Node {
    Assigns: Assign[];
    Args: Word[];
  }
  export interface BinaryCmd extends Node {
    Op: number;
    X: Stmt;
    Y: Stmt;
  }
  export interface FuncDecl extends Node {
    Name: Lit;
    Body: Stmt;
  }
  export interface DeclClause extends Node {
    Variant: Lit;
    Args: Assign[];
  }
  export interface UnaryTest extends Node {
    Op: number;
    X: Node;
  }
  export interface BinaryTest extends Node {
    Op: number;
    X: Node;
    Y: Node;
  }
  export interface Parser {
    /** Throws a Go error value (not a JS Error) whose Error() is "name:line:col: what is wrong". */
    Parse(src: string, name: string): File;
  }

  export interface Syntax {
  NewParser(...options: unknown[]): Parser;
  /** Calls `visit` for `node` and every node below it (children only when it returns true); null after each node's children. */
  Walk(node: Node, visit: (node: Node | null) => boolean): void;
  NodeType(node: Node): string;
  /** The word with its brace expansions (`{a,b}`, `{1..3}`) split out into BraceExp parts. */
  SplitBraces(word: Word): Word;
  }
  const sh: { syntax: Syntax };
  export default sh;
}
