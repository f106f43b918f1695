//! Signatures: calling conventions, parameters and returns (Cranelift's `ir::extfunc`).

use super::types::Type;
use smallvec::SmallVec;

/// Calling conventions (the names Cranelift prints).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CallConv {
    /// `fast`: best performance, not ABI-stable.
    Fast,
    /// `tail`: supports tail calls, not ABI-stable.
    Tail,
    /// `system_v`: the System V convention.
    SystemV,
    /// `windows_fastcall`: the Windows convention (x64 and ARM).
    WindowsFastcall,
    /// `apple_aarch64`: Apple's variant of the aarch64 convention.
    AppleAarch64,
    /// `probestack`: the convention of the stack probe function.
    Probestack,
    /// `winch`: Winch's convention, not ABI-stable.
    Winch,
    /// `preserve_all`: clobbers no register (for instrumentation call sites).
    PreserveAll,
}

const CALL_CONVS: [(&str, CallConv); 8] = [
    ("fast", CallConv::Fast),
    ("tail", CallConv::Tail),
    ("system_v", CallConv::SystemV),
    ("windows_fastcall", CallConv::WindowsFastcall),
    ("apple_aarch64", CallConv::AppleAarch64),
    ("probestack", CallConv::Probestack),
    ("winch", CallConv::Winch),
    ("preserve_all", CallConv::PreserveAll),
];

impl CallConv {
    /// The name Cranelift prints (`system_v`).
    pub fn name(self) -> &'static str {
        CALL_CONVS.iter().find(|c| c.1 == self).unwrap().0
    }
    /// The calling convention named `s` (as `name` prints it), if any.
    pub fn parse(s: &str) -> Option<CallConv> {
        CALL_CONVS.iter().find(|c| c.0 == s).map(|c| c.1)
    }
}

/// How a parameter or return value is extended to register width.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Ext {
    /// No extension: the bits above the type are undefined.
    #[default]
    None,
    /// Zero-extension (`uext`).
    Uext,
    /// Sign-extension (`sext`).
    Sext,
}

/// Special meaning of a parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Purpose {
    /// An ordinary value.
    #[default]
    Normal,
    /// The VM context pointer (`vmctx`), the base of `vmctx` global values.
    VmCtx,
    /// The address where the callee writes a returned struct (`sret`).
    StructReturn,
    /// A struct passed by value, of this size in bytes (`sarg(n)`).
    StructArgument(u32),
}

/// A parameter or return value of a signature.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AbiParam {
    /// The value's type.
    pub ty: Type,
    /// How the value is extended to register width.
    pub ext: Ext,
    /// The parameter's special meaning, if any.
    pub purpose: Purpose,
}

impl AbiParam {
    /// A normal, unextended parameter of type `ty`.
    pub fn new(ty: Type) -> Self {
        AbiParam {
            ty,
            ext: Ext::None,
            purpose: Purpose::Normal,
        }
    }
}

/// A function signature.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Signature {
    /// The parameters, in order.
    pub params: AbiParams,
    /// The return values, in order.
    pub returns: AbiParams,
    /// The calling convention.
    pub call_conv: CallConv,
}

/// The parameters or the returns of a signature: a list shared by reference count (an empty
/// list holds nothing). Cloning a signature copies no list, so a lift gives every signature
/// equal to one it has converted the same lists (one allocation per distinct list, where a
/// list per signature cost an allocation per function). It reads as a slice; `push`,
/// `extend` and mutable access copy a list that is shared first.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AbiParams(Option<std::sync::Arc<[AbiParam]>>);

impl AbiParams {
    /// An empty list.
    pub const fn new() -> Self {
        AbiParams(None)
    }

    /// An empty list (the room is not kept: a list is built once, then shared).
    pub fn with_capacity(_: usize) -> Self {
        AbiParams(None)
    }

    /// Append `p` (the list is copied, so appending one by one in a loop is quadratic:
    /// `extend`, `collect` or `From` a slice build a list at once).
    pub fn push(&mut self, p: AbiParam) {
        self.extend(core::iter::once(p));
    }

    /// Empty the list.
    pub fn clear(&mut self) {
        self.0 = None;
    }

    /// The heap bytes this list holds alone (none when it is shared, or empty).
    pub(super) fn unshared_heap_bytes(&self) -> usize {
        match &self.0 {
            Some(a) if std::sync::Arc::strong_count(a) == 1 => {
                // (the two counts, then the elements)
                2 * core::mem::size_of::<usize>() + core::mem::size_of_val(&**a)
            }
            _ => 0,
        }
    }
}

impl core::ops::Deref for AbiParams {
    type Target = [AbiParam];
    #[inline]
    fn deref(&self) -> &[AbiParam] {
        self.0.as_deref().unwrap_or(&[])
    }
}

impl core::ops::DerefMut for AbiParams {
    fn deref_mut(&mut self) -> &mut [AbiParam] {
        match &mut self.0 {
            Some(a) => std::sync::Arc::make_mut(a),
            None => &mut [],
        }
    }
}

impl FromIterator<AbiParam> for AbiParams {
    fn from_iter<I: IntoIterator<Item = AbiParam>>(iter: I) -> Self {
        // (one allocation: the list, unless it has more than eight entries)
        let v: SmallVec<[AbiParam; 8]> = iter.into_iter().collect();
        AbiParams::from(&v[..])
    }
}

impl From<Vec<AbiParam>> for AbiParams {
    fn from(v: Vec<AbiParam>) -> Self {
        AbiParams::from(&v[..])
    }
}

impl From<&[AbiParam]> for AbiParams {
    fn from(v: &[AbiParam]) -> Self {
        AbiParams(if v.is_empty() { None } else { Some(v.into()) })
    }
}

impl Extend<AbiParam> for AbiParams {
    fn extend<I: IntoIterator<Item = AbiParam>>(&mut self, iter: I) {
        let mut v: SmallVec<[AbiParam; 8]> = SmallVec::from_slice(self);
        v.extend(iter);
        *self = AbiParams::from(&v[..]);
    }
}

impl<'a> IntoIterator for &'a AbiParams {
    type Item = &'a AbiParam;
    type IntoIter = core::slice::Iter<'a, AbiParam>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<'a> IntoIterator for &'a mut AbiParams {
    type Item = &'a mut AbiParam;
    type IntoIter = core::slice::IterMut<'a, AbiParam>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter_mut()
    }
}

impl core::fmt::Debug for AbiParams {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl Signature {
    /// A signature with no parameters and no returns.
    pub fn new(call_conv: CallConv) -> Self {
        Signature {
            params: AbiParams::new(),
            returns: AbiParams::new(),
            call_conv,
        }
    }
}
