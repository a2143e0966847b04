//! The space description language (API.md §8): [`parse_space`] turns text
//! into a validated [`SpaceDesc`]; [`format_space`] writes one back.
//!
//! ```text
//! description  = "space" NAME "key" attr [ attrs-clause ] option* ;
//! attrs-clause = ("attributes" | "attribute") attr { "," attr }
//!                ( subspace* | { replex | hybrid } ) index* ;
//! attr         = [ type ] NAME ;                      (no type means string)
//! subspace     = "subspace" NAME { "," NAME } ;
//! replex       = "replex" NAME { "," NAME } ;
//! hybrid       = "hybrid" NAME "," NAME "groups" NUMBER "," NUMBER ;
//! index        = [ "global" ] "index" NAME [ "create" NUMBER ("partition" | "partitions") ] ;
//! option       = "tolerate" NUMBER ("failure" | "failures")
//!              | "create" NUMBER ("partition" | "partitions")
//!              | "with" "authorization"
//!              | "with" "relaxed" "placement" ;
//! type         = "string" | "int" | "int64" | "float" | "document"
//!              | "timestamp" "(" unit ")" | "list" "(" prim ")"
//!              | "set" "(" prim ")" | "map" "(" prim "," prim ")" ;
//! ```
//!
//! Lexical rules: `#` starts a comment that runs to the end of the line (the
//! only comment syntax, as API.md §8.1 says); spaces, tabs, carriage returns
//! and newlines separate tokens and are otherwise insignificant. Names are an
//! ASCII letter or `_`, then ASCII letters, digits or `_`; names starting
//! with `__` are reserved, and keywords are not names. Numbers are decimal
//! digits and must fit the option (`u32`; at most [`PARTITIONS_MAX`]
//! partitions). Options may come in any order and repeat; the last one wins.
//! Defaults: `tolerate 1 failure`, `create 64 partitions`, no authorization.
//!
//! Every error names a 1-based line and column (counted in characters, a tab
//! is one column) of the token at fault and says why.
//!
//! `create N partitions` right after `global index NAME` sets that global
//! index's indexlet count (default: the space's partitions); after a local
//! `index NAME` it is the space option, as it always was, since a local
//! index lives inside the regions and has no partitions of its own.
//!
//! `with authorization` only sets [`SpaceDesc::authorization`]; the hidden
//! `__secret` attribute it implies is not listed in `attrs`.
//!
//! A `replex` or `hybrid` clause makes a *replex space*
//! ([`SpaceDesc::replex`], `docs/design/replex.md`): the key subspace, each
//! replex and each hybrid hold one copy of every object. Such a space has
//! no `subspace` clauses and no global indexes. A replex is named by its
//! first attribute (two replexes may not share it), the key subspace by the
//! key. `hybrid A, B groups N1, N2` joins two replexes declared before it
//! (or the key subspace): its grid has `N1` intervals over A's first
//! attribute and `N2` over B's, each a group of whole intervals of that
//! replex, so `N1` must divide A's interval count on that attribute and
//! `N2` B's (usually `N1 · N2` is the space's partitions). `tolerate f`
//! must be at most copies − 1 and defaults to copies − 1.
//! `with relaxed placement` (replex spaces only) lets two copies of an
//! object share a daemon when daemons are too few.

use crate::schema::{Attribute, GlobalIndexDecl, HybridDecl, ReplexDecl, SpaceDesc};
use crate::value::{DataType, Prim, TimeUnit};
use std::fmt::Write as _;

/// Why a description was refused, and where.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}: {reason}")]
pub struct ParseSpaceError {
    /// 1-based.
    pub line: usize,
    /// 1-based, in characters.
    pub column: usize,
    /// What is wrong, in a sentence for humans.
    pub reason: String,
}

/// The default of `tolerate N failures`.
pub const DEFAULT_FAULT_TOLERANCE: u32 = 1;
/// The default of `create N partitions`.
pub const DEFAULT_PARTITIONS: u32 = 64;
/// The most partitions a space may ask for (bounds the configuration's size).
pub const PARTITIONS_MAX: u32 = 65_536;

const NO_SUBSPACES: &str =
    "a replex space has no `subspace` clauses (its replexes are its subspaces and its copies)";

/// The reserved words of the language (API.md §8.1); none may be a name.
pub const KEYWORDS: &[&str] = &[
    "space",
    "key",
    "attribute",
    "attributes",
    "subspace",
    "index",
    "global",
    "create",
    "partition",
    "partitions",
    "tolerate",
    "failure",
    "failures",
    "with",
    "authorization",
    "replex",
    "hybrid",
    "groups",
    "relaxed",
    "placement",
    "string",
    "int",
    "int64",
    "float",
    "document",
    "timestamp",
    "second",
    "minute",
    "hour",
    "day",
    "week",
    "month",
    "list",
    "set",
    "map",
];

const TYPE_KEYWORDS: &[&str] = &[
    "string",
    "int",
    "int64",
    "float",
    "document",
    "timestamp",
    "list",
    "set",
    "map",
];

fn is_keyword(word: &str) -> bool {
    KEYWORDS.contains(&word)
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    Word(String),
    Number(String),
    Comma,
    LParen,
    RParen,
    End,
}

#[derive(Clone, Debug)]
struct Token {
    tok: Tok,
    line: usize,
    column: usize,
}

impl Token {
    fn word(&self) -> Option<&str> {
        match &self.tok {
            Tok::Word(w) => Some(w),
            _ => None,
        }
    }

    fn is_word(&self, w: &str) -> bool {
        self.word() == Some(w)
    }

    /// The token as an error message quotes it.
    fn describe(&self) -> String {
        match &self.tok {
            Tok::Word(w) if is_keyword(w) => format!("keyword `{w}`"),
            Tok::Word(w) => format!("`{w}`"),
            Tok::Number(n) => format!("number `{n}`"),
            Tok::Comma => "`,`".to_string(),
            Tok::LParen => "`(`".to_string(),
            Tok::RParen => "`)`".to_string(),
            Tok::End => "the end of the description".to_string(),
        }
    }

    fn error(&self, reason: impl Into<String>) -> ParseSpaceError {
        ParseSpaceError {
            line: self.line,
            column: self.column,
            reason: reason.into(),
        }
    }
}

fn lex(text: &str) -> Result<Vec<Token>, ParseSpaceError> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let (mut i, mut line, mut column) = (0usize, 1usize, 1usize);
    while i < chars.len() {
        let c = chars[i];
        let (start_line, start_column) = (line, column);
        match c {
            '\n' => {
                i += 1;
                line += 1;
                column = 1;
            }
            ' ' | '\t' | '\r' => {
                i += 1;
                column += 1;
            }
            '#' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                    column += 1;
                }
            }
            ',' | '(' | ')' => {
                let tok = match c {
                    ',' => Tok::Comma,
                    '(' => Tok::LParen,
                    _ => Tok::RParen,
                };
                tokens.push(Token { tok, line, column });
                i += 1;
                column += 1;
            }
            _ if c.is_ascii_alphanumeric() || c == '_' => {
                let start = i;
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                    i += 1;
                    column += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let tok = if c.is_ascii_digit() {
                    if !word.bytes().all(|b| b.is_ascii_digit()) {
                        return Err(ParseSpaceError {
                            line: start_line,
                            column: start_column,
                            reason: format!(
                                "invalid token `{word}`: a number is decimal digits only, and a name \
                                 cannot start with a digit"
                            ),
                        });
                    }
                    Tok::Number(word)
                } else {
                    Tok::Word(word)
                };
                tokens.push(Token {
                    tok,
                    line: start_line,
                    column: start_column,
                });
            }
            _ => {
                let hint = if c.is_alphabetic() {
                    " (names are ASCII letters, digits and `_`)"
                } else {
                    ""
                };
                return Err(ParseSpaceError {
                    line,
                    column,
                    reason: format!("unexpected character `{c}`{hint}"),
                });
            }
        }
    }
    tokens.push(Token {
        tok: Tok::End,
        line,
        column,
    });
    Ok(tokens)
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> &Token {
        &self.tokens[self.pos]
    }

    fn next(&mut self) -> Token {
        let t = self.tokens[self.pos].clone();
        if self.pos + 1 < self.tokens.len() {
            self.pos += 1;
        }
        t
    }

    fn peek_is(&self, word: &str) -> bool {
        self.peek().is_word(word)
    }

    /// "expected X, found Y", or "unexpected end …" at the end.
    fn expected(token: &Token, what: &str) -> ParseSpaceError {
        match token.tok {
            Tok::End => token.error(format!(
                "unexpected end of the description: expected {what}"
            )),
            _ => token.error(format!("expected {what}, found {}", token.describe())),
        }
    }

    fn expect_word(&mut self, word: &str, context: &str) -> Result<Token, ParseSpaceError> {
        let t = self.next();
        if t.is_word(word) {
            Ok(t)
        } else {
            Err(Self::expected(&t, &format!("`{word}` {context}")))
        }
    }

    fn expect_punct(&mut self, tok: Tok, context: &str) -> Result<Token, ParseSpaceError> {
        let t = self.next();
        if t.tok == tok {
            Ok(t)
        } else {
            let shown = match tok {
                Tok::Comma => "`,`",
                Tok::LParen => "`(`",
                _ => "`)`",
            };
            Err(Self::expected(&t, &format!("{shown} {context}")))
        }
    }

    /// A valid, non-keyword, non-reserved name.
    fn expect_name(&mut self, what: &str) -> Result<(String, Token), ParseSpaceError> {
        let t = self.next();
        match t.word() {
            Some(w) if is_keyword(w) => {
                Err(t.error(format!("`{w}` is a keyword and cannot be used as {what}")))
            }
            Some(w) if w.starts_with("__") => Err(t.error(format!(
                "the name `{w}` is reserved (names starting with `__` are reserved)"
            ))),
            Some(w) => Ok((w.to_string(), t.clone())),
            None => Err(Self::expected(&t, what)),
        }
    }

    fn expect_number(&mut self, what: &str) -> Result<(u32, Token), ParseSpaceError> {
        let t = self.next();
        match &t.tok {
            Tok::Number(n) => match n.parse::<u32>() {
                Ok(v) => Ok((v, t.clone())),
                Err(_) => Err(t.error(format!(
                    "the number `{n}` is out of range (at most {})",
                    u32::MAX
                ))),
            },
            _ => Err(Self::expected(&t, what)),
        }
    }

    /// `NUMBER ("partition" | "partitions")`, the number in 1..=[`PARTITIONS_MAX`].
    fn expect_partitions(&mut self, what: &str) -> Result<u32, ParseSpaceError> {
        let (n, ntok) = self.expect_number(what)?;
        let unit = self.next();
        if !(unit.is_word("partition") || unit.is_word("partitions")) {
            return Err(Self::expected(&unit, "`partitions` after the number"));
        }
        if n == 0 {
            return Err(ntok.error("`create 0 partitions`: at least 1 partition is needed"));
        }
        if n > PARTITIONS_MAX {
            return Err(ntok.error(format!(
                "`create {n} partitions` is out of range (at most {PARTITIONS_MAX})"
            )));
        }
        Ok(n)
    }

    fn parse_prim(&mut self, container: &str) -> Result<Prim, ParseSpaceError> {
        let t = self.next();
        match t.word() {
            Some("string") => Ok(Prim::String),
            Some("int" | "int64") => Ok(Prim::Int),
            Some("float") => Ok(Prim::Float),
            Some(w) => Err(t.error(format!(
                "invalid element type `{w}` for {container} (elements must be string, int, int64 or float)"
            ))),
            None => Err(Self::expected(&t, &format!("an element type for {container}"))),
        }
    }

    /// A type, its keyword already taken as `first`.
    fn parse_type(&mut self, first: &Token) -> Result<DataType, ParseSpaceError> {
        let word = first.word().expect("a type keyword");
        Ok(match word {
            "string" => DataType::String,
            "int" | "int64" => DataType::Int,
            "float" => DataType::Float,
            "document" => DataType::Document,
            "timestamp" => {
                self.expect_punct(Tok::LParen, "after `timestamp` (e.g. `timestamp(day)`)")?;
                let t = self.next();
                let unit = match t.word() {
                    Some("second") => TimeUnit::Second,
                    Some("minute") => TimeUnit::Minute,
                    Some("hour") => TimeUnit::Hour,
                    Some("day") => TimeUnit::Day,
                    Some("week") => TimeUnit::Week,
                    Some("month") => TimeUnit::Month,
                    Some(w) => {
                        return Err(t.error(format!(
                            "unknown time unit `{w}` (expected second, minute, hour, day, week or month)"
                        )))
                    }
                    None => return Err(Self::expected(&t, "a time unit")),
                };
                self.expect_punct(Tok::RParen, "after the time unit")?;
                DataType::Timestamp(unit)
            }
            "list" | "set" => {
                self.expect_punct(Tok::LParen, &format!("after `{word}` (e.g. `{word}(int)`)"))?;
                let p = self.parse_prim(&format!("`{word}`"))?;
                self.expect_punct(Tok::RParen, "after the element type")?;
                if word == "list" {
                    DataType::List(p)
                } else {
                    DataType::Set(p)
                }
            }
            "map" => {
                self.expect_punct(Tok::LParen, "after `map` (e.g. `map(string, int)`)")?;
                let k = self.parse_prim("map keys")?;
                self.expect_punct(Tok::Comma, "between the map's key and value types")?;
                let v = self.parse_prim("map values")?;
                self.expect_punct(Tok::RParen, "after the map's value type")?;
                DataType::Map(k, v)
            }
            _ => unreachable!("TYPE_KEYWORDS covers every type"),
        })
    }

    /// `[ type ] NAME`. Returns the attribute, its name token and its type
    /// token (the name token when no type was written).
    fn parse_attr(&mut self, what: &str) -> Result<(Attribute, Token, Token), ParseSpaceError> {
        let first = self.peek().clone();
        match first.word() {
            Some(w) if TYPE_KEYWORDS.contains(&w) => {
                self.next();
                let dtype = self.parse_type(&first)?;
                let (name, name_tok) =
                    self.expect_name(&format!("{what} name (after its type {dtype})"))?;
                Ok((Attribute { name, dtype }, name_tok, first))
            }
            Some(w) if !is_keyword(w) => {
                let (name, name_tok) = self.expect_name(&format!("{what} name"))?;
                // `NAME NAME` or `NAME(`: the first word was meant as a type.
                let follow = self.peek();
                if matches!(follow.tok, Tok::LParen)
                    || follow.word().is_some_and(|w| !is_keyword(w))
                {
                    return Err(name_tok.error(format!(
                        "unknown type `{name}` (types are string, int, int64, float, document, \
                         timestamp(unit), list(t), set(t) and map(t, t))"
                    )));
                }
                Ok((
                    Attribute {
                        name,
                        dtype: DataType::String,
                    },
                    name_tok.clone(),
                    name_tok,
                ))
            }
            _ => {
                let t = self.next();
                match t.word() {
                    Some(w) => Err(t.error(format!(
                        "`{w}` is a keyword and cannot be used as {what} name"
                    ))),
                    None => Err(Self::expected(
                        &t,
                        &format!("{what} (an optional type, then a name)"),
                    )),
                }
            }
        }
    }
}

/// Parses and validates a space description.
pub fn parse_space(text: &str) -> Result<SpaceDesc, ParseSpaceError> {
    let mut p = Parser {
        tokens: lex(text)?,
        pos: 0,
    };

    let first = p.peek().clone();
    if !first.is_word("space") {
        return Err(Parser::expected(
            &first,
            "`space` (a description starts with `space NAME key …`)",
        ));
    }
    p.next();
    let (name, _) = p.expect_name("a space name")?;
    p.expect_word("key", "after the space name")?;
    let (key, _, key_type_tok) = p.parse_attr("the key")?;
    if !key.dtype.is_hashable() {
        return Err(key_type_tok.error(format!(
            "the key cannot have type {} (a key must be string, int, float or timestamp)",
            key.dtype
        )));
    }
    let mut attrs = vec![key];

    // attributes clause, then subspaces, then indexes.
    let has_attributes = p.peek_is("attributes") || p.peek_is("attribute");
    let mut subspaces: Vec<Vec<usize>> = Vec::new();
    let mut indexes: Vec<usize> = Vec::new();
    let mut global_indexes: Vec<GlobalIndexDecl> = Vec::new();
    let mut replex: Option<ReplexDecl> = None;
    // The group counts' tokens, two per hybrid, checked once the
    // partitions are known.
    let mut group_toks: Vec<Token> = Vec::new();
    if has_attributes {
        p.next();
        loop {
            let (attr, name_tok, _) = p.parse_attr("an attribute")?;
            if attr.name == attrs[0].name {
                return Err(name_tok.error(format!(
                    "attribute `{}` has the same name as the key",
                    attr.name
                )));
            }
            if attrs.iter().any(|a| a.name == attr.name) {
                return Err(name_tok.error(format!("duplicate attribute `{}`", attr.name)));
            }
            attrs.push(attr);
            if matches!(p.peek().tok, Tok::Comma) {
                p.next();
            } else {
                break;
            }
        }
        let lookup = |attrs: &[Attribute],
                      name: &str,
                      tok: &Token,
                      clause: &str|
         -> Result<usize, ParseSpaceError> {
            match attrs.iter().position(|a| a.name == name) {
                Some(0) => Err(tok.error(match clause {
                    "subspace" => format!(
                        "the key `{name}` cannot be listed in a subspace (it has its own subspace)"
                    ),
                    "replex" => format!(
                        "the key `{name}` cannot be listed in a replex (the key subspace is \
                         already a replex)"
                    ),
                    _ => format!("the key `{name}` cannot be indexed (key lookups need no index)"),
                })),
                Some(i) => Ok(i),
                None => Err(tok.error(format!("unknown attribute `{name}` in {clause}"))),
            }
        };
        while p.peek_is("subspace") {
            p.next();
            let mut dims: Vec<usize> = Vec::new();
            loop {
                let (n, tok) = p.expect_name("an attribute name in the subspace")?;
                let i = lookup(&attrs, &n, &tok, "subspace")?;
                let dtype = attrs[i].dtype;
                if !dtype.is_hashable() {
                    return Err(tok.error(format!(
                        "attribute `{n}` has type {dtype}, which cannot be a subspace dimension \
                         (only string, int, float and timestamp can)"
                    )));
                }
                if dims.contains(&i) {
                    return Err(tok.error(format!("attribute `{n}` is repeated in this subspace")));
                }
                dims.push(i);
                if matches!(p.peek().tok, Tok::Comma) {
                    p.next();
                } else {
                    break;
                }
            }
            subspaces.push(dims);
        }
        // Replex and hybrid clauses, in any order; a hybrid names replexes
        // declared before it.
        while p.peek_is("replex") || p.peek_is("hybrid") {
            let clause = p.next();
            if !subspaces.is_empty() {
                return Err(clause.error(NO_SUBSPACES));
            }
            let decl = replex.get_or_insert_with(ReplexDecl::default);
            if clause.is_word("replex") {
                let mut dims: Vec<usize> = Vec::new();
                loop {
                    let (n, tok) = p.expect_name("an attribute name in the replex")?;
                    let i = lookup(&attrs, &n, &tok, "replex")?;
                    let dtype = attrs[i].dtype;
                    if !dtype.is_hashable() {
                        return Err(tok.error(format!(
                            "attribute `{n}` has type {dtype}, which cannot be a replex dimension \
                             (only string, int, float and timestamp can)"
                        )));
                    }
                    if dims.contains(&i) {
                        return Err(
                            tok.error(format!("attribute `{n}` is repeated in this replex"))
                        );
                    }
                    if dims.is_empty() && decl.replexes.iter().any(|r| r[0] == i) {
                        return Err(tok.error(format!(
                            "a replex on `{n}` is already declared (a replex is named by its \
                             first attribute, so no two share it)"
                        )));
                    }
                    dims.push(i);
                    if matches!(p.peek().tok, Tok::Comma) {
                        p.next();
                    } else {
                        break;
                    }
                }
                decl.replexes.push(dims);
                continue;
            }
            // hybrid NAME "," NAME "groups" NUMBER "," NUMBER
            let mut sides = [0usize; 2];
            for k in 0..2 {
                if k == 1 {
                    p.expect_punct(Tok::Comma, "between the hybrid's two replexes")?;
                }
                let (n, tok) =
                    p.expect_name("a replex's first attribute (or the key) in the hybrid")?;
                let side = match attrs.iter().position(|a| a.name == n) {
                    Some(0) => 0,
                    Some(i) => match decl.replexes.iter().position(|r| r[0] == i) {
                        Some(r) => r + 1,
                        None => {
                            return Err(tok.error(format!(
                                "`{n}` names no replex declared before this hybrid (a hybrid \
                                 joins the key subspace or replexes, each named by its first \
                                 attribute)"
                            )))
                        }
                    },
                    None => return Err(tok.error(format!("unknown attribute `{n}` in hybrid"))),
                };
                if k == 1 && sides[0] == side {
                    return Err(tok.error(format!(
                        "a hybrid joins two different replexes, but both sides name `{n}`"
                    )));
                }
                sides[k] = side;
            }
            if decl
                .hybrids
                .iter()
                .any(|h| h.sides == sides || h.sides == [sides[1], sides[0]])
            {
                return Err(clause.error("a hybrid between these two replexes is already declared"));
            }
            p.expect_word(
                "groups",
                "after the hybrid's two replexes (e.g. `groups 4, 4`)",
            )?;
            let mut groups = [0u32; 2];
            for (k, g) in groups.iter_mut().enumerate() {
                if k == 1 {
                    p.expect_punct(Tok::Comma, "between the hybrid's two group counts")?;
                }
                let (n, tok) = p.expect_number("a number of groups")?;
                if n == 0 {
                    return Err(tok.error("a hybrid needs at least 1 group per side"));
                }
                *g = n;
                group_toks.push(tok);
            }
            decl.hybrids.push(HybridDecl { sides, groups });
        }
        if p.peek_is("subspace") && replex.is_some() {
            return Err(p.peek().error(NO_SUBSPACES));
        }
        while p.peek_is("index") || p.peek_is("global") {
            let global = p.peek_is("global");
            if global {
                if replex.is_some() {
                    return Err(p.peek().error(
                        "a replex space has no global indexes (not supported yet; a replex on \
                         the attribute serves its searches)",
                    ));
                }
                p.next();
                let t = p.peek().clone();
                if !t.is_word("index") {
                    return Err(Parser::expected(&t, "`index` after `global`"));
                }
            }
            p.next();
            let (n, tok) = p.expect_name("an attribute name to index")?;
            let i = lookup(&attrs, &n, &tok, "index")?;
            let dtype = attrs[i].dtype;
            if global {
                if !dtype.is_hashable() {
                    return Err(tok.error(format!(
                        "attribute `{n}` has type {dtype}, which a global index cannot order \
                         (only string, int, float and timestamp can)"
                    )));
                }
                if global_indexes.iter().any(|g| g.attr == i) {
                    return Err(tok.error(format!("attribute `{n}` already has a global index")));
                }
                let mut partitions = None;
                if p.peek_is("create") {
                    p.next();
                    partitions = Some(p.expect_partitions("indexlets after `create`")?);
                }
                global_indexes.push(GlobalIndexDecl {
                    attr: i,
                    partitions,
                });
                continue;
            }
            if !dtype.is_indexable() {
                return Err(tok.error(format!(
                    "attribute `{n}` has type {dtype}, which cannot be indexed by an `index` clause \
                     (index a document path with add_index)"
                )));
            }
            if indexes.contains(&i) {
                return Err(tok.error(format!("attribute `{n}` is already indexed")));
            }
            indexes.push(i);
        }
    }

    // Options, in any order, repeated: the last one wins.
    let mut tolerate: Option<(u32, Token)> = None;
    let mut partitions = DEFAULT_PARTITIONS;
    let mut authorization = false;
    let mut relaxed: Option<Token> = None;
    let mut seen_option = false;
    loop {
        let t = p.peek().clone();
        match t.word() {
            Some("tolerate") => {
                p.next();
                let (n, ntok) = p.expect_number("a number of failures after `tolerate`")?;
                let unit = p.next();
                if !(unit.is_word("failure") || unit.is_word("failures")) {
                    return Err(Parser::expected(&unit, "`failures` after the number"));
                }
                tolerate = Some((n, ntok));
            }
            Some("create") => {
                p.next();
                partitions = p.expect_partitions("a number of partitions after `create`")?;
            }
            Some("with") => {
                p.next();
                let what = p.next();
                if what.is_word("relaxed") {
                    p.expect_word("placement", "after `with relaxed`")?;
                    relaxed = Some(what);
                } else if what.is_word("authorization") {
                    authorization = true;
                } else {
                    return Err(Parser::expected(
                        &what,
                        "`authorization` or `relaxed placement` after `with`",
                    ));
                }
            }
            _ => break,
        }
        seen_option = true;
    }

    let t = p.peek().clone();
    match t.word() {
        _ if t.tok == Tok::End => {}
        Some(w @ ("subspace" | "index" | "global" | "replex" | "hybrid")) if !has_attributes => {
            return Err(t.error(format!("`{w}` needs an `attributes` clause before it")));
        }
        Some(w @ ("subspace" | "index" | "global" | "replex" | "hybrid")) if seen_option => {
            return Err(t.error(format!("`{w}` clauses must come before the options")));
        }
        Some("subspace") if replex.is_some() => return Err(t.error(NO_SUBSPACES)),
        Some(w @ ("subspace" | "replex" | "hybrid")) => {
            return Err(t.error(format!("`{w}` clauses must come before `index` clauses")))
        }
        Some("attribute" | "attributes") => {
            return Err(
                t.error("the attributes clause must come right after the key, and only once")
            )
        }
        Some("key") => return Err(t.error("a space has exactly one key")),
        _ => {
            return Err(t.error(format!(
                "unexpected {} after the end of the description",
                t.describe()
            )))
        }
    }

    let mut desc = SpaceDesc {
        name,
        attrs,
        subspaces,
        indexes,
        global_indexes,
        fault_tolerance: DEFAULT_FAULT_TOLERANCE,
        partitions,
        authorization,
        replex: None,
    };
    let Some(mut decl) = replex else {
        if let Some(t) = relaxed {
            return Err(t.error(
                "`with relaxed placement` applies to replex spaces only (a space with \
                 `replex` clauses)",
            ));
        }
        if let Some((f, _)) = tolerate {
            desc.fault_tolerance = f;
        }
        return Ok(desc);
    };
    decl.relaxed = relaxed.is_some();
    let copies = decl.copies();
    desc.replex = Some(decl);
    // Each group count divides the interval count it coarsens.
    let hybrids = desc.replex.as_ref().map_or(&[][..], |r| &r.hybrids[..]);
    for (h, toks) in hybrids.iter().zip(group_toks.chunks(2)) {
        for ((&side, &groups), tok) in h.sides.iter().zip(&h.groups).zip(toks) {
            let intervals = desc.replex_intervals(side).unwrap_or(1);
            let first = desc.replex_attrs(side).map_or(0, |a| a[0]);
            if !intervals.is_multiple_of(groups) {
                let what = if side == 0 {
                    format!("the key subspace (`{}`)", desc.attrs[0].name)
                } else {
                    format!("replex `{}`", desc.attrs[first].name)
                };
                return Err(tok.error(format!(
                    "{groups} groups do not divide the {intervals} intervals of {what} on `{}` \
                     (with {} partitions); a hybrid's group counts must divide them",
                    desc.attrs[first].name, desc.partitions
                )));
            }
        }
    }
    let most = (copies - 1) as u32;
    desc.fault_tolerance = match tolerate {
        Some((f, t)) if f > most => {
            return Err(t.error(format!(
                "`tolerate {f}` is more than this replex space survives: its {copies} copies \
                 (the key subspace, each replex and each hybrid hold one) tolerate at most \
                 {most} failures"
            )))
        }
        Some((f, _)) => f,
        None => most,
    };
    Ok(desc)
}

/// Writes `desc` in the description language, one clause per line, every
/// type and option explicit, so that [`parse_space`] gives back an equal
/// `SpaceDesc` (for any valid `desc`).
pub fn format_space(desc: &SpaceDesc) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "space {}", desc.name);
    let key = desc.key();
    let _ = writeln!(out, "key {} {}", key.dtype, key.name);
    if desc.attrs.len() > 1 {
        let _ = writeln!(out, "attributes");
        let last = desc.attrs.len() - 1;
        for (i, a) in desc.attrs.iter().enumerate().skip(1) {
            let sep = if i == last { "" } else { "," };
            let _ = writeln!(out, "    {} {}{sep}", a.dtype, a.name);
        }
    }
    let names = |idx: &[usize]| {
        idx.iter()
            .map(|&i| desc.attrs[i].name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    for s in &desc.subspaces {
        let _ = writeln!(out, "subspace {}", names(s));
    }
    if let Some(replex) = &desc.replex {
        for r in &replex.replexes {
            let _ = writeln!(out, "replex {}", names(r));
        }
        for h in &replex.hybrids {
            let side = |k: usize| {
                let first = desc.replex_attrs(h.sides[k]).map_or(0, |a| a[0]);
                desc.attrs[first].name.as_str()
            };
            let _ = writeln!(
                out,
                "hybrid {}, {} groups {}, {}",
                side(0),
                side(1),
                h.groups[0],
                h.groups[1]
            );
        }
    }
    for &i in &desc.indexes {
        let _ = writeln!(out, "index {}", desc.attrs[i].name);
    }
    for g in &desc.global_indexes {
        let _ = write!(out, "global index {}", desc.attrs[g.attr].name);
        match g.partitions {
            Some(1) => {
                let _ = writeln!(out, " create 1 partition");
            }
            Some(n) => {
                let _ = writeln!(out, " create {n} partitions");
            }
            None => {
                let _ = writeln!(out);
            }
        }
    }
    let plural = |n: u32, one: &str, many: &str| {
        if n == 1 {
            one.to_string()
        } else {
            many.to_string()
        }
    };
    // `tolerate` first: right after a global index clause, `create` would
    // be read as that index's indexlet count.
    let _ = writeln!(
        out,
        "tolerate {} {}",
        desc.fault_tolerance,
        plural(desc.fault_tolerance, "failure", "failures")
    );
    let _ = writeln!(
        out,
        "create {} {}",
        desc.partitions,
        plural(desc.partitions, "partition", "partitions")
    );
    if desc.authorization {
        let _ = writeln!(out, "with authorization");
    }
    if desc.replex.as_ref().is_some_and(|r| r.relaxed) {
        let _ = writeln!(out, "with relaxed placement");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn attr(name: &str, dtype: DataType) -> Attribute {
        Attribute {
            name: name.into(),
            dtype,
        }
    }

    #[test]
    fn global_index_clauses_mix_with_local_ones_and_keep_their_own_partitions() {
        let d = parse_space(
            "space s key k attributes a, int b, float c index a global index a \
             global index b create 8 partitions index b global index c create 1 partition \
             create 16 partitions",
        )
        .unwrap();
        assert_eq!(d.indexes, vec![1, 2]);
        assert_eq!(
            d.global_indexes,
            vec![
                GlobalIndexDecl {
                    attr: 1,
                    partitions: None
                },
                GlobalIndexDecl {
                    attr: 2,
                    partitions: Some(8)
                },
                GlobalIndexDecl {
                    attr: 3,
                    partitions: Some(1)
                },
            ]
        );
        assert_eq!(d.partitions, 16);
        assert_eq!(d.global_indexes[0].indexlets(&d), 16);
        assert_eq!(d.global_indexes[1].indexlets(&d), 8);
        // After a local index, `create` is still the space's option.
        let local = parse_space("space s key k attributes a index a create 8 partitions").unwrap();
        assert_eq!(local.partitions, 8);
        assert!(local.global_indexes.is_empty());
    }

    #[test]
    fn accepts_the_api_examples() {
        let kv = parse_space("space kv key k attributes v").unwrap();
        assert_eq!(
            kv,
            SpaceDesc {
                name: "kv".into(),
                attrs: vec![attr("k", DataType::String), attr("v", DataType::String)],
                subspaces: vec![],
                indexes: vec![],
                fault_tolerance: 1,
                partitions: 64,
                authorization: false,
                global_indexes: Vec::new(),
                replex: None,
            }
        );

        let pb = parse_space(
            "space phonebook key username attributes first, last, int phone subspace\n\
             first, last, phone create 8 partitions tolerate 2 failures",
        )
        .unwrap();
        assert_eq!(
            pb.attrs,
            vec![
                attr("username", DataType::String),
                attr("first", DataType::String),
                attr("last", DataType::String),
                attr("phone", DataType::Int),
            ]
        );
        assert_eq!(pb.subspaces, vec![vec![1, 2, 3]]);
        assert_eq!((pb.partitions, pb.fault_tolerance), (8, 2));

        let ev = parse_space("space events key timestamp(day) when attribute body").unwrap();
        assert_eq!(
            ev.attrs[0],
            attr("when", DataType::Timestamp(TimeUnit::Day))
        );

        let locks = parse_space("space locks key name").unwrap();
        assert_eq!(locks.attrs, vec![attr("name", DataType::String)]);

        let acc = parse_space(
            "space accounts key account attributes string name, int balance with authorization",
        )
        .unwrap();
        assert!(acc.authorization);
        assert_eq!(acc.attrs[2], attr("balance", DataType::Int));
    }

    #[test]
    fn accepts_every_type_and_clause() {
        let text = "# a space with everything\n\
            space everything   # trailing comment\n\
            key int64 id\n\
            attributes\n\
            \tstring s, int i, int64 j, float f, document d,\n\
            timestamp(second) t1, timestamp(minute) t2, timestamp(hour) t3,\n\
            timestamp(day) t4, timestamp(week) t5, timestamp(month) t6,\n\
            list(string) ls, list(int) li, list(float) lf, set(int64) si,\n\
            map(string, float) msf, map( int , int64 ) mii, plain, _under, x9\n\
            subspace s, i subspace f\n\
            subspace t1\n\
            index ls index msf index s\n\
            create 1 partition tolerate 0 failures with authorization create 16 partitions\n\
            tolerate 3 failure\n";
        let d = parse_space(text).unwrap();
        use DataType as T;
        let types: Vec<T> = d.attrs.iter().map(|a| a.dtype).collect();
        assert_eq!(
            types,
            vec![
                T::Int,
                T::String,
                T::Int,
                T::Int,
                T::Float,
                T::Document,
                T::Timestamp(TimeUnit::Second),
                T::Timestamp(TimeUnit::Minute),
                T::Timestamp(TimeUnit::Hour),
                T::Timestamp(TimeUnit::Day),
                T::Timestamp(TimeUnit::Week),
                T::Timestamp(TimeUnit::Month),
                T::List(Prim::String),
                T::List(Prim::Int),
                T::List(Prim::Float),
                T::Set(Prim::Int),
                T::Map(Prim::String, Prim::Float),
                T::Map(Prim::Int, Prim::Int),
                T::String,
                T::String,
                T::String,
            ]
        );
        assert_eq!(d.attrs[18].name, "plain");
        assert_eq!(d.attrs[19].name, "_under");
        assert_eq!(d.subspaces, vec![vec![1, 2], vec![4], vec![6]]);
        assert_eq!(d.indexes, vec![12, 16, 1]);
        // Options repeat; the last one wins.
        assert_eq!(
            (d.partitions, d.fault_tolerance, d.authorization),
            (16, 3, true)
        );
    }

    #[test]
    fn options_before_nothing_and_singular_forms() {
        let d = parse_space("space a key k tolerate 5 failures create 2 partitions").unwrap();
        assert_eq!((d.partitions, d.fault_tolerance), (2, 5));
        let d = parse_space("space a key k attribute v create 65536 partitions").unwrap();
        assert_eq!(d.partitions, 65536);
        let d = parse_space("space\r\na\r\nkey\r\nk").unwrap();
        assert_eq!(d.name, "a");
    }

    /// Every rejection reason, with the line and column it must name.
    #[test]
    fn rejects_with_position_and_reason() {
        let table: &[(&str, usize, usize, &str)] = &[
            ("", 1, 1, "unexpected end of the description: expected `space`"),
            ("   # only a comment\n", 2, 1, "unexpected end"),
            ("spaces x key k", 1, 1, "expected `space`"),
            ("space", 1, 6, "unexpected end of the description: expected a space name"),
            ("space 9 key k", 1, 7, "expected a space name, found number `9`"),
            ("space __x key k", 1, 7, "the name `__x` is reserved"),
            ("space int key k", 1, 7, "`int` is a keyword and cannot be used as a space name"),
            ("space s k", 1, 9, "expected `key` after the space name, found `k`"),
            ("space s key", 1, 12, "unexpected end of the description: expected the key"),
            ("space s key integer k", 1, 13, "unknown type `integer`"),
            ("space s key k attributes integer v", 1, 26, "unknown type `integer`"),
            ("space s key k attributes foo(bar) v", 1, 26, "unknown type `foo`"),
            ("space s key list(string) k", 1, 13, "the key cannot have type list(string)"),
            ("space s key document k", 1, 13, "the key cannot have type document"),
            ("space s key k attributes a, b, a", 1, 32, "duplicate attribute `a`"),
            ("space s key k attributes int k", 1, 30, "attribute `k` has the same name as the key"),
            ("space s key k\nattributes a\nsubspace k", 3, 10, "the key `k` cannot be listed in a subspace"),
            ("space s key k attributes list(int) l subspace l", 1, 47, "cannot be a subspace dimension"),
            ("space s key k attributes document d subspace d", 1, 46, "type document, which cannot be a subspace"),
            ("space s key k attributes a subspace b", 1, 37, "unknown attribute `b` in subspace"),
            ("space s key k attributes a, b subspace a, b, a", 1, 46, "attribute `a` is repeated in this subspace"),
            ("space s key k attributes a index b", 1, 34, "unknown attribute `b` in index"),
            ("space s key k attributes a index k", 1, 34, "the key `k` cannot be indexed"),
            ("space s key k attributes document d index d", 1, 43, "type document, which cannot be indexed"),
            ("space s key k attributes a index a index a", 1, 42, "attribute `a` is already indexed"),
            ("space s key k attributes document d global index d", 1, 50, "which a global index cannot order"),
            ("space s key k attributes a global index a global index a", 1, 56, "already has a global index"),
            ("space s key k attributes a global index a create 0 partitions", 1, 50, "at least 1 partition"),
            ("space s key k attributes a global a", 1, 35, "`index` after `global`"),
            ("space s key k attributes a global index k", 1, 41, "the key `k` cannot be indexed"),
            ("space s key k global index a", 1, 15, "`global` needs an `attributes` clause"),
            ("space s key k create 0 partitions", 1, 22, "`create 0 partitions`"),
            ("space s key k create 65537 partitions", 1, 22, "out of range (at most 65536)"),
            ("space s key k create 99999999999 partitions", 1, 22, "the number `99999999999` is out of range"),
            ("space s key k tolerate 4294967296 failures", 1, 24, "is out of range"),
            ("space s key k create many partitions", 1, 22, "expected a number of partitions after `create`"),
            ("space s key k create 4", 1, 23, "unexpected end of the description: expected `partitions`"),
            ("space s key k tolerate 1 partitions", 1, 26, "expected `failures` after the number"),
            ("space s key k with", 1, 19, "expected `authorization` or `relaxed placement` after `with`"),
            ("space s key k with relaxed", 1, 27, "expected `placement` after `with relaxed`"),
            ("space s key k attributes a with relaxed placement", 1, 33, "applies to replex spaces only"),
            ("space s key k replex a", 1, 15, "`replex` needs an `attributes` clause"),
            ("space s key k attributes a replex c", 1, 35, "unknown attribute `c` in replex"),
            ("space s key k attributes a replex k", 1, 35, "the key `k` cannot be listed in a replex"),
            ("space s key k attributes a replex a replex a", 1, 44, "a replex on `a` is already declared"),
            ("space s key k attributes a, b replex a, b replex a", 1, 50, "a replex on `a` is already declared"),
            ("space s key k attributes a replex a, a", 1, 38, "attribute `a` is repeated in this replex"),
            ("space s key k attributes document d replex d", 1, 44, "cannot be a replex dimension"),
            ("space s key k attributes a, b replex a subspace b", 1, 40, "a replex space has no `subspace` clauses"),
            ("space s key k attributes a, b subspace b replex a", 1, 42, "a replex space has no `subspace` clauses"),
            ("space s key k attributes a, b replex a index a subspace b", 1, 48, "a replex space has no `subspace` clauses"),
            ("space s key k attributes a replex a global index a", 1, 37, "a replex space has no global indexes"),
            ("space s key k attributes a index a replex a", 1, 36, "`replex` clauses must come before `index` clauses"),
            ("space s key k attributes a create 4 partitions replex a", 1, 48, "must come before the options"),
            ("space s key k attributes a, b replex a hybrid a, b groups 2, 2", 1, 50, "`b` names no replex declared before this hybrid"),
            ("space s key k attributes a, b replex a hybrid a, c groups 2, 2", 1, 50, "unknown attribute `c` in hybrid"),
            ("space s key k attributes a, b replex a hybrid a, a groups 2, 2", 1, 50, "both sides name `a`"),
            ("space s key k attributes a, b replex a hybrid a k groups 2, 2", 1, 49, "expected `,` between the hybrid's two replexes"),
            ("space s key k attributes a replex a hybrid a, k groups 2", 1, 57, "unexpected end of the description: expected `,` between the hybrid's two group counts"),
            ("space s key k attributes a replex a hybrid a, k 2, 2", 1, 49, "expected `groups` after the hybrid's two replexes"),
            ("space s key k attributes a replex a hybrid a, k groups 0, 2", 1, 56, "at least 1 group per side"),
            ("space s key k attributes a replex a hybrid a, k groups 2, 2 hybrid k, a groups 4, 1", 1, 61, "a hybrid between these two replexes is already declared"),
            ("space s key k attributes a replex a hybrid a, k groups 5, 4 create 12 partitions", 1, 56, "5 groups do not divide the 12 intervals of replex `a` on `a`"),
            ("space s key k attributes a replex a hybrid a, k groups 2, 5 create 12 partitions", 1, 59, "5 groups do not divide the 12 intervals of the key subspace (`k`)"),
            ("space s key k attributes a, b replex a, b hybrid a, k groups 3, 1 create 64 partitions", 1, 62, "3 groups do not divide the 8 intervals of replex `a`"),
            ("space s key k attributes a replex a tolerate 2 failures", 1, 46, "`tolerate 2` is more than this replex space survives: its 2 copies"),
            ("space s key k attributes a, b replex a hybrid a, k groups 1, 1 tolerate 3 failures", 1, 73, "tolerate at most 2 failures"),
            ("space s key k attributes replex", 1, 26, "`replex` is a keyword"),
            ("space s key k attributes groups", 1, 26, "`groups` is a keyword"),
            ("space s key k attributes a b", 1, 26, "unknown type `a`"),
            ("space s key k attributes a extra, b", 1, 26, "unknown type `a`"),
            ("space s key k attributes a 5", 1, 28, "unexpected number `5` after the end"),
            ("space s key k attributes a)", 1, 27, "unexpected `)` after the end"),
            ("space s key k subspace a", 1, 15, "`subspace` needs an `attributes` clause"),
            ("space s key k index a", 1, 15, "`index` needs an `attributes` clause"),
            ("space s key k attributes a index a subspace a", 1, 36, "must come before `index` clauses"),
            ("space s key k attributes a create 2 partitions subspace a", 1, 48, "must come before the options"),
            ("space s key k create 2 partitions attributes a", 1, 35, "the attributes clause must come right after the key"),
            ("space s key k key j", 1, 15, "a space has exactly one key"),
            ("space s key k attributes int", 1, 29, "unexpected end of the description: expected an attribute name (after its type int)"),
            ("space s key k attributes int, b", 1, 29, "expected an attribute name (after its type int), found `,`"),
            ("space s key k attributes subspace", 1, 26, "`subspace` is a keyword and cannot be used as an attribute name"),
            ("space s key k attributes int index", 1, 30, "`index` is a keyword and cannot be used as an attribute name"),
            ("space s key k attributes a,", 1, 28, "unexpected end of the description: expected an attribute"),
            ("space s key k attributes int __secret", 1, 30, "the name `__secret` is reserved"),
            ("space s key k attributes timestamp x", 1, 36, "expected `(` after `timestamp`"),
            ("space s key k attributes timestamp(year) x", 1, 36, "unknown time unit `year`"),
            ("space s key k attributes timestamp(day x", 1, 40, "expected `)` after the time unit"),
            ("space s key k attributes list(document) x", 1, 31, "invalid element type `document` for `list`"),
            ("space s key k attributes set(bool) x", 1, 30, "invalid element type `bool` for `set`"),
            ("space s key k attributes list() x", 1, 31, "expected an element type for `list`, found `)`"),
            ("space s key k attributes map(string) x", 1, 36, "expected `,` between the map's key and value types"),
            ("space s key k attributes map(string, list) x", 1, 38, "invalid element type `list` for map values"),
            ("space s key k attributes a\n  b-c", 2, 4, "unexpected character `-`"),
            ("space s key k attributes é", 1, 26, "unexpected character `é` (names are ASCII"),
            ("space s key k // comment", 1, 15, "unexpected character `/`"),
            ("space s key k create 8partitions", 1, 22, "invalid token `8partitions`"),
            ("space s key k attributes a, 9b", 1, 29, "invalid token `9b`"),
            ("space s\tkey k\n\n   attributes   a, a", 3, 20, "duplicate attribute `a`"),
        ];
        assert!(table.len() > 60);
        for (text, line, column, reason) in table {
            let err = parse_space(text).expect_err(text);
            assert!(
                err.line == *line && err.column == *column && err.reason.contains(reason),
                "{text:?}: expected {line}:{column} containing {reason:?}, got {err}"
            );
        }
    }

    #[test]
    fn replex_clauses_make_a_replex_space() {
        let d = parse_space(
            "space s key k attributes a, int b, c replex a replex b, c \
             hybrid k, b groups 4, 2 hybrid a, b groups 2, 2 index c create 16 partitions",
        )
        .unwrap();
        assert!(d.subspaces.is_empty());
        assert_eq!(d.indexes, vec![3]);
        let r = d.replex.as_ref().unwrap();
        assert_eq!(r.replexes, vec![vec![1], vec![2, 3]]);
        assert_eq!(
            r.hybrids,
            vec![
                HybridDecl {
                    sides: [0, 2],
                    groups: [4, 2]
                },
                HybridDecl {
                    sides: [1, 2],
                    groups: [2, 2]
                },
            ]
        );
        assert!(!r.relaxed);
        // Five copies: f defaults to four, may be lower.
        assert_eq!((r.copies(), d.fault_tolerance), (5, 4));
        assert_eq!(d.replicas_per_region(), 1);
        // `replex b, c` cuts 16 partitions over 2 dimensions as 4 × 4, so
        // its first dimension has 4 intervals.
        assert_eq!(d.replex_intervals(2), Some(4));
        let text = format_space(&d);
        assert!(
            text.contains("replex a\nreplex b, c\nhybrid k, b groups 4, 2\nhybrid a, b groups 2, 2\nindex c\n"),
            "{text}"
        );
        assert_eq!(parse_space(&text).unwrap(), d);
        let d = parse_space(
            "space s key k attributes a replex a tolerate 0 failures with relaxed placement",
        )
        .unwrap();
        assert_eq!(d.fault_tolerance, 0);
        assert!(d.replex.as_ref().unwrap().relaxed);
        assert!(format_space(&d).ends_with("with relaxed placement\n"));
        // A plain space is as before: no replex, f + 1 replicas.
        let d = parse_space("space s key k attributes a subspace a tolerate 2 failures").unwrap();
        assert_eq!((d.replex.clone(), d.replicas_per_region()), (None, 3));
    }

    #[test]
    fn error_display_names_line_and_column() {
        let err = parse_space("space s key k\ncreate 0 partitions").unwrap_err();
        assert!(err.to_string().starts_with("line 2, column 8: "), "{err}");
    }

    #[test]
    fn format_examples() {
        let d = parse_space(
            "space s key int k attributes a, float b subspace b index a with authorization",
        )
        .unwrap();
        assert_eq!(
            format_space(&d),
            "space s\nkey int k\nattributes\n    string a,\n    float b\nsubspace b\nindex a\n\
             tolerate 1 failure\ncreate 64 partitions\nwith authorization\n"
        );
        let d = parse_space("space s key k create 1 partitions tolerate 0 failures").unwrap();
        assert_eq!(
            format_space(&d),
            "space s\nkey string k\ntolerate 0 failures\ncreate 1 partition\n"
        );
    }

    fn arb_prim() -> impl Strategy<Value = Prim> {
        prop_oneof![Just(Prim::String), Just(Prim::Int), Just(Prim::Float)]
    }

    fn arb_type() -> impl Strategy<Value = DataType> {
        let unit = prop_oneof![
            Just(TimeUnit::Second),
            Just(TimeUnit::Minute),
            Just(TimeUnit::Hour),
            Just(TimeUnit::Day),
            Just(TimeUnit::Week),
            Just(TimeUnit::Month),
        ];
        prop_oneof![
            Just(DataType::String),
            Just(DataType::Int),
            Just(DataType::Float),
            Just(DataType::Document),
            unit.prop_map(DataType::Timestamp),
            arb_prim().prop_map(DataType::List),
            arb_prim().prop_map(DataType::Set),
            (arb_prim(), arb_prim()).prop_map(|(k, v)| DataType::Map(k, v)),
        ]
    }

    fn arb_name() -> impl Strategy<Value = String> {
        "[a-zA-Z_][a-zA-Z0-9_]{0,6}"
            .prop_filter("valid name", |n| !is_keyword(n) && !n.starts_with("__"))
    }

    fn arb_desc() -> impl Strategy<Value = SpaceDesc> {
        let key_type = arb_type().prop_filter("hashable", |t| t.is_hashable());
        (
            arb_name(),
            key_type,
            proptest::collection::btree_set(arb_name(), 1..7),
            proptest::collection::vec(arb_type(), 6),
            proptest::collection::vec(
                proptest::collection::vec(any::<proptest::sample::Index>(), 1..4),
                0..3,
            ),
            proptest::collection::vec(any::<proptest::sample::Index>(), 0..3),
            0u32..5,
            1u32..=PARTITIONS_MAX,
            any::<bool>(),
            proptest::collection::vec(
                (
                    any::<proptest::sample::Index>(),
                    proptest::option::of(1u32..=PARTITIONS_MAX),
                ),
                0..3,
            ),
        )
            .prop_map(
                |(name, key_type, names, types, subs, idxs, f, p, auth, globals)| {
                    let mut names: Vec<String> = names.into_iter().collect();
                    let key_name = names.remove(0);
                    let mut attrs = vec![Attribute {
                        name: key_name,
                        dtype: key_type,
                    }];
                    attrs.extend(
                        names
                            .into_iter()
                            .zip(types)
                            .map(|(name, dtype)| Attribute { name, dtype }),
                    );
                    let hashable: Vec<usize> = (1..attrs.len())
                        .filter(|&i| attrs[i].dtype.is_hashable())
                        .collect();
                    let indexable: Vec<usize> = (1..attrs.len())
                        .filter(|&i| attrs[i].dtype.is_indexable())
                        .collect();
                    let mut subspaces = Vec::new();
                    if !hashable.is_empty() {
                        for picks in subs {
                            let mut dims: Vec<usize> = Vec::new();
                            for pick in picks {
                                let i = *pick.get(&hashable);
                                if !dims.contains(&i) {
                                    dims.push(i);
                                }
                            }
                            subspaces.push(dims);
                        }
                    }
                    let mut indexes: Vec<usize> = Vec::new();
                    if !indexable.is_empty() {
                        for pick in idxs {
                            let i = *pick.get(&indexable);
                            if !indexes.contains(&i) {
                                indexes.push(i);
                            }
                        }
                    }
                    let mut global_indexes: Vec<GlobalIndexDecl> = Vec::new();
                    if !hashable.is_empty() {
                        for (pick, partitions) in globals {
                            let attr = *pick.get(&hashable);
                            if global_indexes.iter().all(|g| g.attr != attr) {
                                global_indexes.push(GlobalIndexDecl { attr, partitions });
                            }
                        }
                    }
                    SpaceDesc {
                        name,
                        attrs,
                        subspaces,
                        indexes,
                        fault_tolerance: f,
                        partitions: p,
                        authorization: auth,
                        global_indexes,
                        replex: None,
                    }
                },
            )
    }

    /// Replex spaces over 1-D and 2-D replexes with hybrids whose group
    /// counts divide what they coarsen.
    fn arb_replex_desc() -> impl Strategy<Value = SpaceDesc> {
        (
            arb_desc(),
            proptest::collection::vec(
                proptest::collection::vec(any::<proptest::sample::Index>(), 1..3),
                1..4,
            ),
            proptest::collection::vec(
                (
                    any::<proptest::sample::Index>(),
                    any::<proptest::sample::Index>(),
                    any::<proptest::sample::Index>(),
                    any::<proptest::sample::Index>(),
                ),
                0..3,
            ),
            prop_oneof![Just(4u32), Just(12), Just(36), Just(64)],
            any::<bool>(),
            any::<proptest::sample::Index>(),
        )
            .prop_filter_map(
                "hashable attributes",
                |(mut desc, picks, hybrids, p, relaxed, f)| {
                    let hashable: Vec<usize> = (1..desc.attrs.len())
                        .filter(|&i| desc.attrs[i].dtype.is_hashable())
                        .collect();
                    if hashable.is_empty() {
                        return None;
                    }
                    let mut decl = ReplexDecl::default();
                    for pick in picks {
                        let mut dims: Vec<usize> = Vec::new();
                        for i in pick {
                            let a = *i.get(&hashable);
                            if !dims.contains(&a) {
                                dims.push(a);
                            }
                        }
                        if decl.replexes.iter().all(|r| r[0] != dims[0]) {
                            decl.replexes.push(dims);
                        }
                    }
                    desc.subspaces.clear();
                    desc.global_indexes.clear();
                    desc.partitions = p;
                    let sides: Vec<usize> = (0..=decl.replexes.len()).collect();
                    for (a, b, g1, g2) in hybrids {
                        let (a, b) = (*a.get(&sides), *b.get(&sides));
                        let taken = decl
                            .hybrids
                            .iter()
                            .any(|h| h.sides == [a, b] || h.sides == [b, a]);
                        if a == b || taken {
                            continue;
                        }
                        desc.replex = Some(decl.clone());
                        let divisors = |side: usize| {
                            let m = desc.replex_intervals(side).unwrap();
                            (1..=m)
                                .filter(|d| m.is_multiple_of(*d))
                                .collect::<Vec<u32>>()
                        };
                        let groups = [*g1.get(&divisors(a)), *g2.get(&divisors(b))];
                        decl.hybrids.push(HybridDecl {
                            sides: [a, b],
                            groups,
                        });
                    }
                    decl.relaxed = relaxed;
                    let copies: Vec<u32> = (0..decl.copies() as u32).collect();
                    desc.fault_tolerance = *f.get(&copies);
                    desc.replex = Some(decl);
                    Some(desc)
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn replex_parse_format_round_trip(desc in arb_replex_desc()) {
            let text = format_space(&desc);
            let parsed = parse_space(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
            prop_assert_eq!(&parsed, &desc);
            prop_assert_eq!(parse_space(&text.replace('\n', " ")).unwrap(), desc);
        }

        #[test]
        fn parse_format_round_trip(desc in arb_desc()) {
            let text = format_space(&desc);
            let parsed = parse_space(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
            prop_assert_eq!(&parsed, &desc);
            // On one line, too: newlines are insignificant.
            prop_assert_eq!(parse_space(&text.replace('\n', " ")).unwrap(), desc);
        }

        /// The parser never panics, and its errors point inside the text
        /// (or just past its end).
        #[test]
        fn parse_never_panics(text in "[a-z0-9_,() #\n\t]{0,60}") {
            if let Err(e) = parse_space(&text) {
                let lines: Vec<&str> = text.split('\n').collect();
                prop_assert!(e.line >= 1 && e.line <= lines.len());
                prop_assert!(e.column >= 1 && e.column <= lines[e.line - 1].chars().count() + 1);
            }
        }
    }
}
