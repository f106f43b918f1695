//! The `.lir` text parser: reads what `print.rs` writes. Errors carry a line and column and
//! never panic on any input.
//!
//! Registers and blocks live in dense arenas, so a number in the text costs memory up to that
//! number. The parser bounds them by the input's size: all the functions of a module together
//! may number at most [`entity_budget`] registers, and as many blocks (a register or block
//! number counts as all the numbers up to it). Honest text, which defines what it numbers,
//! stays far below.

use super::entities::*;
use super::function::*;
use super::inst::{effects, Format, Opcode};
use super::module::{Module, SymbolKind};
use super::operand::{Cond, MemRef, Operand};
use super::print::natural_result_type;
use super::signature::*;
use super::tables::*;
use super::types::Type;
use crate::hash::HashMap;
use cranelift_entity::EntityRef;
use smallvec::SmallVec;

/// How many registers, and how many blocks, the functions of a module parsed from `len` bytes
/// may number in all: `max(4096, 8 * len)`.
pub fn entity_budget(len: usize) -> usize {
    len.saturating_mul(8).max(4096)
}

/// Where the parts of a parsed module are in its text (1-based lines), from
/// [`parse_module_with_lines`]: for reporting verifier errors at a line.
#[derive(Debug, Clone, Default)]
pub struct SourceMap {
    functions: HashMap<String, FunctionLines>,
}

#[derive(Debug, Clone, Default)]
struct FunctionLines {
    line: u32,
    /// By block index; 0 where unknown.
    blocks: Vec<u32>,
    /// By instruction index.
    insts: Vec<u32>,
}

impl SourceMap {
    /// The line of `function`'s header.
    pub fn function_line(&self, function: &str) -> Option<u32> {
        self.functions.get(function).map(|f| f.line)
    }
    /// The line of block `b`'s label in `function`.
    pub fn block_line(&self, function: &str, b: Block) -> Option<u32> {
        let f = self.functions.get(function)?;
        f.blocks.get(b.index()).copied().filter(|&l| l != 0)
    }
    /// The line where instruction `i` of `function` starts.
    pub fn inst_line(&self, function: &str, i: Inst) -> Option<u32> {
        let f = self.functions.get(function)?;
        f.insts.get(i.index()).copied()
    }
}

/// A parse error at a 1-based line and column.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{col}: {msg}")]
pub struct ParseError {
    /// The line, from 1.
    pub line: u32,
    /// The column, from 1.
    pub col: u32,
    /// What is wrong.
    pub msg: String,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Reg(u32),
    Sym(String),
    Str(String),
    Int(i128),
    Punct(char),
    Arrow,
    Eof,
}

#[derive(Clone)]
struct Lexer<'a> {
    src: &'a [u8],
    pos: usize,
    line: u32,
    col: u32,
}

type PResult<T> = Result<T, ParseError>;

impl<'a> Lexer<'a> {
    fn err<T>(&self, line: u32, col: u32, msg: impl Into<String>) -> PResult<T> {
        Err(ParseError {
            line,
            col,
            msg: msg.into(),
        })
    }
    fn bump(&mut self) -> u8 {
        let c = self.src[self.pos];
        self.pos += 1;
        if c == b'\n' {
            self.line += 1;
            self.col = 1;
        } else {
            self.col += 1;
        }
        c
    }
    fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }
    fn is_ident_char(c: u8) -> bool {
        c.is_ascii_alphanumeric() || c == b'_' || c == b'.' || c == b'$'
    }
    /// The next token with its position.
    fn next(&mut self) -> PResult<(Tok, u32, u32)> {
        loop {
            match self.peek() {
                Some(c) if c.is_ascii_whitespace() => {
                    self.bump();
                }
                Some(b';') => {
                    while let Some(c) = self.peek() {
                        if c == b'\n' {
                            break;
                        }
                        self.bump();
                    }
                }
                _ => break,
            }
        }
        let (line, col) = (self.line, self.col);
        let Some(c) = self.peek() else {
            return Ok((Tok::Eof, line, col));
        };
        let tok = if c == b'%' {
            self.bump();
            let start = self.pos;
            while self.peek().is_some_and(Self::is_ident_char) {
                self.bump();
            }
            let word = std::str::from_utf8(&self.src[start..self.pos]).unwrap_or("");
            match word.strip_prefix("vr").and_then(|n| n.parse::<u32>().ok()) {
                Some(n) if n < 1 << 24 => Tok::Reg(n),
                _ => {
                    return self.err(
                        line,
                        col,
                        format!("expected a register like %vr3, found '%{word}'"),
                    )
                }
            }
        } else if c == b'@' {
            self.bump();
            if self.peek() == Some(b'"') {
                Tok::Sym(self.string(line, col)?)
            } else {
                let start = self.pos;
                while self.peek().is_some_and(Self::is_ident_char) {
                    self.bump();
                }
                if start == self.pos {
                    return self.err(line, col, "expected a symbol name after '@'");
                }
                Tok::Sym(String::from_utf8_lossy(&self.src[start..self.pos]).into_owned())
            }
        } else if c == b'"' {
            Tok::Str(self.string(line, col)?)
        } else if c.is_ascii_digit()
            || (c == b'-'
                && self
                    .src
                    .get(self.pos + 1)
                    .is_some_and(|d| d.is_ascii_digit()))
        {
            let neg = c == b'-';
            if neg {
                self.bump();
            }
            let start = self.pos;
            while self
                .peek()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_')
            {
                self.bump();
            }
            let text = std::str::from_utf8(&self.src[start..self.pos]).unwrap_or("");
            let v = if let Some(hex) = text.strip_prefix("0x") {
                u128::from_str_radix(hex, 16)
                    .ok()
                    .and_then(|v| i128::try_from(v).ok())
            } else {
                text.parse::<i128>().ok()
            };
            match v {
                Some(v) if v <= u64::MAX as i128 => Tok::Int(if neg { -v } else { v }),
                _ => return self.err(line, col, format!("bad number '{text}'")),
            }
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = self.pos;
            while self.peek().is_some_and(Self::is_ident_char) {
                self.bump();
            }
            Tok::Ident(String::from_utf8_lossy(&self.src[start..self.pos]).into_owned())
        } else if c == b'-' && self.src.get(self.pos + 1) == Some(&b'>') {
            self.bump();
            self.bump();
            Tok::Arrow
        } else if b"()[]{},=+-*:".contains(&c) {
            self.bump();
            Tok::Punct(c as char)
        } else {
            let ch = std::str::from_utf8(&self.src[self.pos..])
                .ok()
                .and_then(|s| s.chars().next())
                .unwrap_or('?');
            return self.err(line, col, format!("unexpected character '{ch}'"));
        };
        Ok((tok, line, col))
    }
    fn string(&mut self, line: u32, col: u32) -> PResult<String> {
        self.bump(); // opening quote
        let mut out = Vec::new();
        loop {
            match self.peek() {
                None | Some(b'\n') => return self.err(line, col, "unterminated string"),
                Some(b'"') => {
                    self.bump();
                    break;
                }
                Some(b'\\') => {
                    self.bump();
                    match self.peek() {
                        Some(b'n') => out.push(b'\n'),
                        Some(b'"') => out.push(b'"'),
                        Some(b'\\') => out.push(b'\\'),
                        _ => return self.err(self.line, self.col, "bad escape in string"),
                    }
                    self.bump();
                }
                Some(_) => out.push(self.bump()),
            }
        }
        String::from_utf8(out).or_else(|_| self.err(line, col, "string is not UTF-8"))
    }
}

struct Parser<'a> {
    lex: Lexer<'a>,
    tok: Tok,
    line: u32,
    col: u32,
    /// Position of the previous token.
    prev_line: u32,
    prev_col: u32,
    module: Module,
    /// See `entity_budget`.
    budget: usize,
    /// Registers and blocks numbered by the functions parsed so far.
    regs_used: usize,
    blocks_used: usize,
    /// Source lines, when asked for; those of the function being parsed apart.
    lines: Option<SourceMap>,
    fn_lines: FunctionLines,
}

/// What a register or block reference was seen at, for "never defined" errors.
struct FnState {
    defined_blocks: Vec<bool>,
    block_refs: Vec<(Block, u32, u32)>,
}

impl<'a> Parser<'a> {
    fn advance(&mut self) -> PResult<()> {
        (self.prev_line, self.prev_col) = (self.line, self.col);
        let (t, l, c) = self.lex.next()?;
        self.tok = t;
        self.line = l;
        self.col = c;
        Ok(())
    }
    fn err<T>(&self, msg: impl Into<String>) -> PResult<T> {
        Err(ParseError {
            line: self.line,
            col: self.col,
            msg: msg.into(),
        })
    }
    /// An error at the token just consumed (for checks made after reading it).
    fn err_prev<T>(&self, msg: impl Into<String>) -> PResult<T> {
        Err(ParseError {
            line: self.prev_line,
            col: self.prev_col,
            msg: msg.into(),
        })
    }
    fn describe(&self) -> String {
        match &self.tok {
            Tok::Ident(s) => format!("'{s}'"),
            Tok::Reg(n) => format!("'%vr{n}'"),
            Tok::Sym(s) => format!("'@{s}'"),
            Tok::Str(s) => format!("\"{s}\""),
            Tok::Int(v) => format!("'{v}'"),
            Tok::Punct(c) => format!("'{c}'"),
            Tok::Arrow => "'->'".into(),
            Tok::Eof => "end of file".into(),
        }
    }
    fn expect_punct(&mut self, c: char) -> PResult<()> {
        if self.tok == Tok::Punct(c) {
            self.advance()
        } else {
            self.err(format!("expected '{c}', found {}", self.describe()))
        }
    }
    fn eat_punct(&mut self, c: char) -> PResult<bool> {
        if self.tok == Tok::Punct(c) {
            self.advance()?;
            Ok(true)
        } else {
            Ok(false)
        }
    }
    fn eat_ident(&mut self, s: &str) -> PResult<bool> {
        if matches!(&self.tok, Tok::Ident(x) if x == s) {
            self.advance()?;
            Ok(true)
        } else {
            Ok(false)
        }
    }
    fn expect_ident(&mut self, what: &str) -> PResult<String> {
        if let Tok::Ident(s) = &self.tok {
            let s = s.clone();
            self.advance()?;
            Ok(s)
        } else {
            self.err(format!("expected {what}, found {}", self.describe()))
        }
    }
    fn expect_keyword(&mut self, kw: &str) -> PResult<()> {
        if self.eat_ident(kw)? {
            Ok(())
        } else {
            self.err(format!("expected '{kw}', found {}", self.describe()))
        }
    }
    fn expect_int(&mut self, what: &str) -> PResult<i128> {
        if let Tok::Int(v) = self.tok {
            self.advance()?;
            Ok(v)
        } else {
            self.err(format!("expected {what}, found {}", self.describe()))
        }
    }
    fn int_in<T: TryFrom<i128>>(&mut self, what: &str) -> PResult<T> {
        let v = self.expect_int(what)?;
        T::try_from(v).or_else(|_| self.err_prev(format!("{what} {v} is out of range")))
    }
    fn expect_str(&mut self) -> PResult<String> {
        if let Tok::Str(s) = &self.tok {
            let s = s.clone();
            self.advance()?;
            Ok(s)
        } else {
            self.err(format!("expected a string, found {}", self.describe()))
        }
    }
    fn expect_sym(&mut self) -> PResult<String> {
        if let Tok::Sym(s) = &self.tok {
            let s = s.clone();
            self.advance()?;
            Ok(s)
        } else {
            self.err(format!(
                "expected a symbol like @name, found {}",
                self.describe()
            ))
        }
    }
    /// An entity index written as `<prefix><n>` (`sig3`, `bb0`).
    fn entity_index(&self, word: &str, prefix: &str) -> Option<u32> {
        let n = word.strip_prefix(prefix)?;
        if n.is_empty() || (n.len() > 1 && n.starts_with('0')) {
            return None;
        }
        n.parse::<u32>().ok().filter(|&n| n < 1 << 24)
    }
    fn expect_entity(&mut self, prefix: &str, what: &str) -> PResult<u32> {
        if let Tok::Ident(s) = &self.tok {
            if let Some(n) = self.entity_index(s, prefix) {
                self.advance()?;
                return Ok(n);
            }
        }
        self.err(format!(
            "expected {what} like {prefix}0, found {}",
            self.describe()
        ))
    }

    fn parse_type(&mut self) -> PResult<Type> {
        let word = self.expect_ident("a type")?;
        Type::parse(&word).map_or_else(|| self.err_prev(format!("unknown type '{word}'")), Ok)
    }

    fn parse_abi_param(&mut self) -> PResult<AbiParam> {
        let ty = self.parse_type()?;
        let mut p = AbiParam::new(ty);
        loop {
            if self.eat_ident("uext")? {
                p.ext = Ext::Uext;
            } else if self.eat_ident("sext")? {
                p.ext = Ext::Sext;
            } else if self.eat_ident("vmctx")? {
                p.purpose = Purpose::VmCtx;
            } else if self.eat_ident("sret")? {
                p.purpose = Purpose::StructReturn;
            } else if self.eat_ident("sarg")? {
                self.expect_punct('(')?;
                p.purpose = Purpose::StructArgument(self.int_in("struct size")?);
                self.expect_punct(')')?;
            } else {
                return Ok(p);
            }
        }
    }

    fn parse_signature(&mut self) -> PResult<Signature> {
        self.expect_punct('(')?;
        // (built in a buffer: a signature's lists are made once, then shared)
        let mut params = SmallVec::<[AbiParam; 8]>::new();
        if !self.eat_punct(')')? {
            loop {
                params.push(self.parse_abi_param()?);
                if self.eat_punct(')')? {
                    break;
                }
                self.expect_punct(',')?;
            }
        }
        let mut returns = SmallVec::<[AbiParam; 4]>::new();
        if self.tok == Tok::Arrow {
            self.advance()?;
            loop {
                returns.push(self.parse_abi_param()?);
                if returns.len() > super::inst::MAX_RESULTS {
                    return self.err(format!(
                        "more than {} return values in a signature",
                        super::inst::MAX_RESULTS
                    ));
                }
                if !self.eat_punct(',')? {
                    break;
                }
            }
        }
        let cc = self.expect_ident("a calling convention")?;
        let call_conv = CallConv::parse(&cc).map_or_else(
            || self.err_prev(format!("unknown calling convention '{cc}'")),
            Ok,
        )?;
        Ok(Signature {
            params: params[..].into(),
            returns: returns[..].into(),
            call_conv,
        })
    }

    /// Optional `+ n` / `- n` offset.
    fn parse_offset(&mut self) -> PResult<i64> {
        if self.eat_punct('+')? {
            self.int_in("offset")
        } else if self.eat_punct('-')? {
            let v = self.expect_int("offset")?;
            i64::try_from(-v).or_else(|_| self.err_prev(format!("offset -{v} is out of range")))
        } else {
            Ok(0)
        }
    }

    fn parse_memflags(&mut self, f: &Function) -> PResult<MemFlags> {
        let mut mf = MemFlags::new();
        loop {
            let Tok::Ident(w) = &self.tok else {
                return Ok(mf);
            };
            let w = w.clone();
            match w.as_str() {
                "notrap" => mf.trap = 0,
                "aligned" => mf.bits |= MemFlags::ALIGNED,
                "readonly" => mf.bits |= MemFlags::READONLY,
                "little" => mf.bits |= MemFlags::LITTLE,
                "big" => mf.bits |= MemFlags::BIG,
                "can_move" => mf.bits |= MemFlags::CAN_MOVE,
                _ => {
                    if let Some(n) = self.entity_index(&w, "region") {
                        if n as usize >= f.regions.len() {
                            return self.err(format!("region{n} is not declared"));
                        }
                        mf.region = Some(Region::from_u32(n));
                    } else if let Some(code) = parse_trap_code(&w) {
                        mf.trap = code;
                    } else {
                        return Ok(mf);
                    }
                }
            }
            self.advance()?;
        }
    }

    /// An error if entity number `n` of a dense arena is beyond the rest of the budget
    /// (`used` by earlier functions), at `pos`.
    fn check_budget(&self, n: u32, used: usize, what: &str, pos: (u32, u32)) -> PResult<()> {
        let left = self.budget.saturating_sub(used);
        if (n as usize) < left {
            return Ok(());
        }
        let why = match left {
            0 => "the input's budget is used up by the functions before".to_string(),
            _ => format!("at most {} for an input of this size", left - 1),
        };
        Err(ParseError {
            line: pos.0,
            col: pos.1,
            msg: format!("{what} is out of range ({why})"),
        })
    }

    /// Register `%vrN`, just read.
    fn reg(&mut self, f: &mut Function, n: u32) -> PResult<Reg> {
        if n as usize >= f.regs.len() {
            let what = format!("register number %vr{n}");
            self.check_budget(n, self.regs_used, &what, (self.prev_line, self.prev_col))?;
            while f.regs.len() <= n as usize {
                f.new_reg(Type::VOID);
            }
        }
        Ok(Reg::from_u32(n))
    }

    /// Block `bbN`, read at `pos`.
    fn block(
        &mut self,
        f: &mut Function,
        st: &mut FnState,
        n: u32,
        pos: (u32, u32),
    ) -> PResult<Block> {
        if n as usize >= f.blocks.len() {
            let what = format!("block number bb{n}");
            self.check_budget(n, self.blocks_used, &what, pos)?;
            while f.blocks.len() <= n as usize {
                f.blocks.push(BlockData::default());
                st.defined_blocks.push(false);
            }
        }
        let b = Block::from_u32(n);
        st.block_refs.push((b, pos.0, pos.1));
        Ok(b)
    }

    /// Block `bbN`, just read.
    fn block_here(&mut self, f: &mut Function, st: &mut FnState, n: u32) -> PResult<Block> {
        let pos = (self.prev_line, self.prev_col);
        self.block(f, st, n, pos)
    }

    fn parse_symbol_ref(&mut self, kind: SymbolKind) -> PResult<Symbol> {
        let name = self.expect_sym()?;
        Ok(self.module.symbol(&name, kind))
    }

    /// A value operand: register, constant, or (where allowed) `argN`.
    fn parse_operand(&mut self, f: &mut Function, st: &mut FnState) -> PResult<Operand> {
        match self.tok.clone() {
            Tok::Reg(n) => {
                self.advance()?;
                Ok(Operand::Reg(self.reg(f, n)?))
            }
            Tok::Int(v) => {
                self.advance()?;
                let v = i64::try_from(v)
                    .or_else(|_| u64::try_from(v).map(|u| u as i64))
                    .or_else(|_| self.err_prev("constant out of range"))?;
                Ok(Operand::Int(v))
            }
            Tok::Ident(w) if w == "f32" || w == "f64" => {
                self.advance()?;
                self.expect_punct(':')?;
                let v = self.expect_int("float bits")?;
                if w == "f32" {
                    let b = u32::try_from(v).or_else(|_| self.err_prev("f32 bits out of range"))?;
                    Ok(Operand::F32(b))
                } else {
                    let b = u64::try_from(v).or_else(|_| self.err_prev("f64 bits out of range"))?;
                    Ok(Operand::F64(b))
                }
            }
            Tok::Ident(w) => {
                if let Some(n) = self.entity_index(&w, "arg") {
                    self.advance()?;
                    Ok(Operand::Arg(n))
                } else if let Some(n) = self.entity_index(&w, "bb") {
                    self.advance()?;
                    Ok(Operand::Block(self.block_here(f, st, n)?))
                } else if let Some(n) = self.entity_index(&w, "stack_obj.") {
                    if n as usize >= f.stack_objs.len() {
                        return self.err(format!("stack_obj.{n} is not declared"));
                    }
                    self.advance()?;
                    let off = self.parse_offset()?;
                    let off = i32::try_from(off)
                        .or_else(|_| self.err_prev("stack offset out of range"))?;
                    Ok(Operand::Stack(StackObj::from_u32(n), off))
                } else if let Some(c) = Cond::parse(&w) {
                    self.advance()?;
                    Ok(Operand::Pred(c))
                } else {
                    self.err(format!("expected an operand, found '{w}'"))
                }
            }
            Tok::Sym(_) => {
                let s = self.parse_symbol_ref(SymbolKind::Function)?;
                let off = self.parse_offset()?;
                Ok(Operand::Sym(s, off))
            }
            Tok::Punct('[') => self.parse_mem(f, st),
            _ => self.err(format!("expected an operand, found {}", self.describe())),
        }
    }

    /// `[%b + %i*4 + 8]`, `[stack_obj.1 + 4]`, `[@g + 8]`, `[16]`.
    fn parse_mem(&mut self, f: &mut Function, st: &mut FnState) -> PResult<Operand> {
        self.expect_punct('[')?;
        let op = match self.tok.clone() {
            Tok::Ident(_) | Tok::Sym(_) => {
                let op = self.parse_operand(f, st)?;
                if !matches!(op, Operand::Stack(..) | Operand::Sym(..)) {
                    return self.err_prev(
                        "expected a stack object, symbol or register in a memory reference",
                    );
                }
                op
            }
            _ => {
                let mut m = MemRef {
                    base: None.into(),
                    index: None.into(),
                    scale: 1,
                    disp: 0,
                };
                let mut neg = false;
                let mut disp_seen = false;
                loop {
                    match self.tok.clone() {
                        Tok::Reg(n) if !neg => {
                            let (rl, rc) = (self.line, self.col);
                            self.advance()?;
                            let r = self.reg(f, n)?;
                            if self.eat_punct('*')? {
                                let s: u8 = self.int_in("scale")?;
                                if ![1, 2, 4, 8].contains(&s) {
                                    return self
                                        .err_prev(format!("scale must be 1, 2, 4 or 8, not {s}"));
                                }
                                if m.index.is_some() {
                                    return Err(ParseError {
                                        line: rl,
                                        col: rc,
                                        msg: "memory reference has two index registers".into(),
                                    });
                                }
                                m.index = r.into();
                                m.scale = s;
                            } else if m.base.is_none() && m.index.is_none() {
                                m.base = r.into();
                            } else {
                                return Err(ParseError {
                                    line: rl,
                                    col: rc,
                                    msg: "memory reference has two base registers".into(),
                                });
                            }
                        }
                        Tok::Int(v) if !disp_seen => {
                            self.advance()?;
                            let v = if neg { -v } else { v };
                            m.disp = i32::try_from(v)
                                .or_else(|_| self.err_prev("displacement out of range"))?;
                            disp_seen = true;
                        }
                        _ => {
                            return self.err(format!(
                                "expected a register or displacement, found {}",
                                self.describe()
                            ))
                        }
                    }
                    if self.eat_punct('+')? {
                        neg = false;
                    } else if self.eat_punct('-')? {
                        neg = true;
                    } else {
                        break;
                    }
                }
                Operand::from(m)
            }
        };
        self.expect_punct(']')?;
        Ok(op)
    }

    fn parse_operand_list(
        &mut self,
        f: &mut Function,
        st: &mut FnState,
        close: Option<char>,
    ) -> PResult<Vec<Operand>> {
        let mut ops = Vec::new();
        if let Some(c) = close {
            if self.eat_punct(c)? {
                return Ok(ops);
            }
        }
        loop {
            ops.push(self.parse_operand(f, st)?);
            if !self.eat_punct(',')? {
                break;
            }
        }
        if let Some(c) = close {
            self.expect_punct(c)?;
        }
        Ok(ops)
    }

    /// Is the current token the start of an operand list (not the next line's instruction)?
    fn at_operand(&self) -> bool {
        match &self.tok {
            Tok::Reg(_) => !self.at_results(),
            Tok::Int(_) | Tok::Sym(_) | Tok::Punct('[') => true,
            Tok::Ident(w) => {
                w == "f32"
                    || w == "f64"
                    || w.starts_with("arg")
                    || w.starts_with("stack_obj.")
                    || Cond::parse(w).is_some()
                    || (w.starts_with("bb")
                        && !matches!(self.lex.clone().next(), Ok((Tok::Punct(':'), ..))))
            }
            _ => false,
        }
    }

    /// Is the register at the current token the start of the next instruction's results
    /// (`%vr3 = ..`, `%vr3: i32, %vr4 = ..`) rather than an operand?
    fn at_results(&self) -> bool {
        let mut lex = self.lex.clone();
        loop {
            match lex.next() {
                Ok((Tok::Punct('=' | ':'), ..)) => return true,
                Ok((Tok::Punct(','), ..)) if matches!(lex.next(), Ok((Tok::Reg(_), ..))) => {}
                _ => return false,
            }
        }
    }

    fn parse_inst(&mut self, f: &mut Function, st: &mut FnState, block: Block) -> PResult<()> {
        let (line, col) = (self.line, self.col);
        // Results.
        let mut results: Vec<(Reg, Option<Type>)> = Vec::new();
        if let Tok::Reg(_) = self.tok {
            loop {
                let Tok::Reg(n) = self.tok else {
                    return self.err("expected a result register");
                };
                self.advance()?;
                let r = self.reg(f, n)?;
                let ty = if self.eat_punct(':')? {
                    Some(self.parse_type()?)
                } else {
                    None
                };
                if results.iter().any(|(x, _)| *x == r) {
                    return self.err(format!("{r} defined twice in one instruction"));
                }
                results.push((r, ty));
                if results.len() > super::inst::MAX_RESULTS {
                    return self.err(format!(
                        "more than {} results in one instruction",
                        super::inst::MAX_RESULTS
                    ));
                }
                if !self.eat_punct(',')? {
                    break;
                }
            }
            self.expect_punct('=')?;
        }
        let word = self.expect_ident("an opcode")?;
        let (name, ty) = match word.split_once('.') {
            Some((n, t)) if Opcode::parse(n).is_some() => (
                n.to_string(),
                Type::parse(t).map_or_else(
                    || {
                        Err(ParseError {
                            line,
                            col,
                            msg: format!("unknown type '{t}'"),
                        })
                    },
                    Ok,
                )?,
            ),
            Some((n, _)) => (n.to_string(), Type::VOID),
            _ => (word.clone(), Type::VOID),
        };
        let Some(opcode) = Opcode::parse(&name) else {
            return Err(ParseError {
                line,
                col,
                msg: format!("unknown opcode '{name}'"),
            });
        };
        let mut aux = 0u32;
        let mut aux2 = 0u32;
        let ops: Vec<Operand> = match opcode.format() {
            Format::Addr if opcode == Opcode::FuncAddr => {
                let op = self.parse_operand(f, st)?;
                self.expect_punct(',')?;
                let n = self.expect_entity("sig", "a signature")?;
                if n as usize >= f.sigs.len() {
                    return self.err_prev(format!("sig{n} is not declared"));
                }
                aux = n;
                vec![op]
            }
            Format::Unary
            | Format::Binary
            | Format::Ternary
            | Format::Copy
            | Format::Return
            | Format::Jump
            | Format::Compare
            | Format::Brif
            | Format::ExnHandlerAddr
            | Format::Addr => {
                if self.at_operand() {
                    let mut ops = vec![self.parse_operand(f, st)?];
                    if matches!(opcode.format(), Format::Compare | Format::Brif) {
                        ops.extend(self.parse_operand_list(f, st, None)?);
                    } else {
                        while self.eat_punct(',')? {
                            ops.push(self.parse_operand(f, st)?);
                        }
                    }
                    ops
                } else {
                    Vec::new()
                }
            }
            Format::Load => {
                let mf = self.parse_memflags(f)?;
                aux = f.intern_memflags(mf).as_u32();
                vec![self.parse_mem(f, st)?]
            }
            Format::Store => {
                let mf = self.parse_memflags(f)?;
                aux = f.intern_memflags(mf).as_u32();
                let m = self.parse_mem(f, st)?;
                self.expect_punct(',')?;
                vec![m, self.parse_operand(f, st)?]
            }
            Format::GlobalValue => {
                let n = self.expect_entity("gv", "a global value")?;
                if n as usize >= f.globals.len() {
                    return self.err_prev(format!("gv{n} is not declared"));
                }
                aux = n;
                Vec::new()
            }
            Format::Call => {
                let mut ops = vec![self.parse_operand(f, st)?];
                self.expect_punct('(')?;
                ops.extend(self.parse_operand_list(f, st, Some(')'))?);
                self.expect_punct(',')?;
                let n = self.expect_entity("sig", "a signature")?;
                if n as usize >= f.sigs.len() {
                    return self.err_prev(format!("sig{n} is not declared"));
                }
                aux = n;
                if opcode == Opcode::TryCall {
                    self.expect_punct(',')?;
                    let n = self.expect_entity("bb", "the normal-return block")?;
                    ops.push(Operand::Block(self.block_here(f, st, n)?));
                    self.expect_punct(',')?;
                    self.expect_punct('[')?;
                    let mut items = Vec::new();
                    if !self.eat_punct(']')? {
                        loop {
                            if self.eat_ident("default")? {
                                self.expect_punct(':')?;
                                items.push(ExnItem::Default);
                                let n = self.expect_entity("bb", "a handler block")?;
                                ops.push(Operand::Block(self.block_here(f, st, n)?));
                            } else if self.eat_ident("context")? {
                                items.push(ExnItem::Context);
                                ops.push(self.parse_operand(f, st)?);
                            } else {
                                let t = self
                                    .expect_entity("tag", "a handler (tagN:, default:, context)")?;
                                self.expect_punct(':')?;
                                items.push(ExnItem::Tag(t));
                                let n = self.expect_entity("bb", "a handler block")?;
                                ops.push(Operand::Block(self.block_here(f, st, n)?));
                            }
                            if self.eat_punct(']')? {
                                break;
                            }
                            self.expect_punct(',')?;
                        }
                    }
                    aux2 = f.exn_tables.push(items).as_u32();
                }
                ops
            }
            Format::Phi => {
                let mut ops = Vec::new();
                while self.eat_punct('[')? {
                    ops.push(self.parse_operand(f, st)?);
                    self.expect_punct(',')?;
                    ops.push(self.parse_operand(f, st)?);
                    self.expect_punct(']')?;
                    if !self.eat_punct(',')? {
                        break;
                    }
                }
                ops
            }
            Format::BrTable => {
                let mut ops = vec![self.parse_operand(f, st)?];
                self.expect_punct(',')?;
                ops.push(self.parse_operand(f, st)?);
                self.expect_punct(',')?;
                self.expect_punct('[')?;
                ops.extend(self.parse_operand_list(f, st, Some(']'))?);
                ops
            }
            Format::Trap => {
                let w = self.expect_ident("a trap code")?;
                aux = parse_trap_code(&w)
                    .map_or_else(|| self.err_prev(format!("unknown trap code '{w}'")), Ok)?
                    as u32;
                Vec::new()
            }
            Format::CondTrap => {
                let op = self.parse_operand(f, st)?;
                self.expect_punct(',')?;
                let w = self.expect_ident("a trap code")?;
                aux = parse_trap_code(&w)
                    .map_or_else(|| self.err_prev(format!("unknown trap code '{w}'")), Ok)?
                    as u32;
                vec![op]
            }
            Format::Opaque => {
                let name = self.expect_str()?;
                let mut imms = SmallVec::new();
                if self.eat_punct('[')? && !self.eat_punct(']')? {
                    {
                        loop {
                            let v = self.expect_int("an immediate")?;
                            imms.push(
                                u64::try_from(v)
                                    .or_else(|_| self.err_prev("immediate out of range"))?,
                            );
                            if self.eat_punct(']')? {
                                break;
                            }
                            self.expect_punct(',')?;
                        }
                    }
                }
                let fx = self.expect_ident("effects (pure, or load+store+trap+side)")?;
                let mut e = 0u8;
                if fx != "pure" {
                    let mut word = fx;
                    loop {
                        e |= match word.as_str() {
                            "load" => effects::LOAD,
                            "store" => effects::STORE,
                            "trap" => effects::TRAP,
                            "side" => effects::SIDE,
                            _ => return self.err_prev(format!("unknown effect '{word}'")),
                        };
                        if !self.eat_punct('+')? {
                            break;
                        }
                        word = self.expect_ident("an effect")?;
                    }
                }
                if self.eat_ident("mem")? {
                    self.expect_punct('(')?;
                    let mf = self.parse_memflags(f)?;
                    self.expect_punct(')')?;
                    aux2 = f.intern_memflags(mf).as_u32() + 1;
                }
                aux = f
                    .opaques
                    .push(OpaqueData {
                        name: name.into(),
                        imms,
                        effects: e,
                    })
                    .as_u32();
                if self.at_operand() {
                    self.parse_operand_list(f, st, None)?
                } else {
                    Vec::new()
                }
            }
        };
        let regs: Vec<Reg> = results.iter().map(|r| r.0).collect();
        let inst = f.make_inst(opcode, ty, &regs, &ops);
        if self.lines.is_some() {
            let il = &mut self.fn_lines.insts;
            il.resize(inst.index() + 1, line);
            il[inst.index()] = line;
        }
        f.insts[inst].aux = aux;
        if opcode.has_aux2() {
            f.set_aux2(inst, aux2);
        }
        for (i, (r, annotated)) in results.iter().enumerate() {
            let natural = natural_result_type(f, opcode, ty, aux, i);
            let t = match (annotated, natural) {
                (Some(t), _) => *t,
                (None, Some(t)) => t,
                (None, None) => {
                    return Err(ParseError {
                        line,
                        col,
                        msg: format!("result {r} needs a type annotation ({r}: T)"),
                    });
                }
            };
            if f.regs[*r].ty != Type::VOID && f.regs[*r].ty != t {
                return Err(ParseError {
                    line,
                    col,
                    msg: format!("{r} redefined with another type"),
                });
            }
            f.regs[*r].ty = t;
        }
        f.append_inst(block, inst);
        Ok(())
    }

    fn parse_function(&mut self) -> PResult<()> {
        let (fline, fcol) = (self.line, self.col);
        self.expect_keyword("function")?;
        let name = self.expect_sym()?;
        let sig = self.parse_signature()?;
        let lk = self.expect_ident("a linkage (export, local, preemptible)")?;
        let linkage = Linkage::parse(&lk)
            .map_or_else(|| self.err_prev(format!("unknown linkage '{lk}'")), Ok)?;
        let mut f = Function::new(name, sig, linkage);
        self.fn_lines = FunctionLines {
            line: fline,
            ..FunctionLines::default()
        };
        if self.eat_ident("address_significant")? {
            f.address_significant = true;
        }
        self.expect_punct('{')?;
        let mut st = FnState {
            defined_blocks: Vec::new(),
            block_refs: Vec::new(),
        };
        // Preamble declarations.
        while let Tok::Ident(w) = &self.tok {
            let w = w.clone();
            if let Some(n) = self.entity_index(&w, "stack_obj.") {
                self.expect_sequential(n, f.stack_objs.len(), &w)?;
                self.advance()?;
                self.expect_punct('=')?;
                self.expect_keyword("size")?;
                let size = self.int_in("size")?;
                self.expect_punct(',')?;
                self.expect_keyword("align")?;
                let align: u64 = self.int_in("alignment")?;
                if !align.is_power_of_two() {
                    return self.err_prev("alignment must be a power of two");
                }
                if align > MAX_STACK_ALIGN {
                    return self.err_prev(format!(
                        "alignment {align} is more than the maximum {MAX_STACK_ALIGN}"
                    ));
                }
                f.stack_objs.push(StackObjData {
                    size,
                    align_shift: align.trailing_zeros() as u8,
                });
            } else if let Some(n) = self.entity_index(&w, "sig") {
                self.expect_sequential(n, f.sigs.len(), &w)?;
                self.advance()?;
                self.expect_punct('=')?;
                let s = self.parse_signature()?;
                f.sigs.push(s);
            } else if let Some(n) = self.entity_index(&w, "region") {
                self.expect_sequential(n, f.regions.len(), &w)?;
                self.advance()?;
                self.expect_punct('=')?;
                let id = self.int_in("region id")?;
                let name = self.expect_str()?;
                f.regions.push(RegionData {
                    id,
                    name: name.into(),
                });
            } else if let Some(n) = self.entity_index(&w, "gv") {
                self.expect_sequential(n, f.globals.len(), &w)?;
                self.advance()?;
                self.expect_punct('=')?;
                let g = self.parse_global(&mut f, n)?;
                f.globals.push(g);
            } else if w == "stack_limit" {
                self.advance()?;
                self.expect_punct('=')?;
                let n = self.expect_entity("gv", "a global value")?;
                if n as usize >= f.globals.len() {
                    return self.err_prev(format!("gv{n} is not declared"));
                }
                f.stack_limit = Some(GlobalRef::from_u32(n));
            } else {
                break;
            }
        }
        // Blocks.
        let mut current: Option<Block> = None;
        loop {
            if self.eat_punct('}')? {
                break;
            }
            if let Tok::Ident(w) = &self.tok {
                if let Some(n) = self.entity_index(w, "bb") {
                    let (l, c) = (self.line, self.col);
                    self.advance()?;
                    if self.eat_punct(':')? {
                        let b = self.block(&mut f, &mut st, n, (l, c))?;
                        st.block_refs.pop();
                        if st.defined_blocks[b.index()] {
                            return Err(ParseError {
                                line: l,
                                col: c,
                                msg: format!("{b} defined twice"),
                            });
                        }
                        st.defined_blocks[b.index()] = true;
                        if self.lines.is_some() {
                            let bl = &mut self.fn_lines.blocks;
                            if bl.len() <= b.index() {
                                bl.resize(b.index() + 1, 0);
                            }
                            bl[b.index()] = l;
                        }
                        f.layout.push(b);
                        current = Some(b);
                        continue;
                    }
                    return Err(ParseError {
                        line: l,
                        col: c,
                        msg: format!("expected ':' after block label bb{n}"),
                    });
                }
            }
            if self.tok == Tok::Eof {
                return self.err(format!(
                    "missing '}}' at the end of function starting at {fline}:{fcol}"
                ));
            }
            let Some(b) = current else {
                return self.err("expected a block label like bb0: before the first instruction");
            };
            self.parse_inst(&mut f, &mut st, b)?;
        }
        for &(b, l, c) in &st.block_refs {
            if !st.defined_blocks[b.index()] {
                return Err(ParseError {
                    line: l,
                    col: c,
                    msg: format!("{b} is used but never defined"),
                });
            }
        }
        self.regs_used += f.regs.len();
        self.blocks_used += f.blocks.len();
        let name = f.name.clone();
        self.module.add_function(f).map_err(|msg| ParseError {
            line: fline,
            col: fcol,
            msg,
        })?;
        if let Some(lines) = &mut self.lines {
            lines
                .functions
                .insert(name.into(), core::mem::take(&mut self.fn_lines));
        }
        Ok(())
    }

    fn expect_sequential(&self, n: u32, len: usize, w: &str) -> PResult<()> {
        if n as usize != len {
            return self.err(format!(
                "'{w}' declared out of order (expected index {len})"
            ));
        }
        Ok(())
    }

    fn parse_global(&mut self, f: &mut Function, n: u32) -> PResult<GlobalData> {
        let base_ok = |p: &Self, b: u32| -> PResult<GlobalRef> {
            if b >= n {
                return p.err_prev(format!(
                    "gv{n} refers to gv{b}, which is not declared before it"
                ));
            }
            Ok(GlobalRef::from_u32(b))
        };
        let w = self.expect_ident("a global value definition")?;
        if w == "vmctx" {
            return Ok(GlobalData::VmCtx);
        }
        if w == "symbol" {
            let colocated = self.eat_ident("colocated")?;
            let tls = self.eat_ident("tls")?;
            let sym = self.parse_symbol_ref(SymbolKind::Data)?;
            let offset = self.parse_offset()?;
            return Ok(GlobalData::Symbol {
                sym,
                offset,
                colocated,
                tls,
            });
        }
        let Some((op, t)) = w.split_once('.') else {
            return self.err_prev(format!("unknown global value kind '{w}'"));
        };
        let ty = Type::parse(t).map_or_else(|| self.err_prev(format!("unknown type '{t}'")), Ok)?;
        match op {
            "load" => {
                let mf = self.parse_memflags(f)?;
                let flags = f.intern_memflags(mf);
                let b = self.expect_entity("gv", "a global value")?;
                let base = base_ok(self, b)?;
                let off = self.parse_offset()?;
                let offset =
                    i32::try_from(off).or_else(|_| self.err_prev("offset out of range"))?;
                Ok(GlobalData::Load {
                    base,
                    offset,
                    ty,
                    flags,
                })
            }
            "iadd_imm" => {
                let b = self.expect_entity("gv", "a global value")?;
                let base = base_ok(self, b)?;
                self.expect_punct(',')?;
                let offset = self.int_in("offset")?;
                Ok(GlobalData::IAddImm { base, offset, ty })
            }
            _ => self.err_prev(format!("unknown global value kind '{op}'")),
        }
    }

    fn parse_module(mut self) -> PResult<(Module, Option<SourceMap>)> {
        self.advance()?;
        loop {
            match &self.tok {
                Tok::Eof => break,
                Tok::Ident(w) if w == "declare" => {
                    self.advance()?;
                    let kind = if self.eat_ident("function")? {
                        SymbolKind::Function
                    } else if self.eat_ident("data")? {
                        SymbolKind::Data
                    } else {
                        return self.err(format!(
                            "expected 'function' or 'data', found {}",
                            self.describe()
                        ));
                    };
                    let s = self.parse_symbol_ref(kind)?;
                    self.module.symbols[s].kind = kind;
                    if self.eat_ident("colocated")? {
                        self.module.symbols[s].colocated = true;
                    }
                }
                Tok::Ident(w) if w == "alias" => {
                    self.advance()?;
                    let a = self.parse_symbol_ref(SymbolKind::Function)?;
                    self.expect_punct('=')?;
                    let b = self.parse_symbol_ref(SymbolKind::Function)?;
                    if a == b {
                        return self.err("a symbol cannot alias itself");
                    }
                    self.module.aliases.insert(a, b);
                }
                Tok::Ident(w) if w == "function" => self.parse_function()?,
                _ => {
                    return self.err(format!(
                        "expected 'function', 'declare' or 'alias', found {}",
                        self.describe()
                    ))
                }
            }
        }
        for a in self.module.aliases.keys() {
            if self.module.symbols[*a].def.is_some() {
                let name = self.module.symbols[*a].name.clone();
                return self.err(format!("@{name} is both an alias and a defined function"));
            }
        }
        Ok((self.module, self.lines))
    }
}

fn parser(text: &str, lines: bool) -> Parser<'_> {
    Parser {
        lex: Lexer {
            src: text.as_bytes(),
            pos: 0,
            line: 1,
            col: 1,
        },
        tok: Tok::Eof,
        line: 1,
        col: 1,
        prev_line: 1,
        prev_col: 1,
        module: Module::new(),
        budget: entity_budget(text.len()),
        regs_used: 0,
        blocks_used: 0,
        lines: lines.then(SourceMap::default),
        fn_lines: FunctionLines::default(),
    }
}

/// Parse a module from `.lir` text.
pub fn parse_module(text: &str) -> Result<Module, ParseError> {
    parser(text, false).parse_module().map(|(m, _)| m)
}

/// Parse a module from `.lir` text, with the lines of its functions, blocks and instructions.
pub fn parse_module_with_lines(text: &str) -> Result<(Module, SourceMap), ParseError> {
    parser(text, true)
        .parse_module()
        .map(|(m, lines)| (m, lines.unwrap_or_default()))
}
