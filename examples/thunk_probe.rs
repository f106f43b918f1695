use cranelift_codegen::control::ControlPlane;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::Context;
fn main() {
    let text = "function %t(i64, i64) -> i64 system_v {
    sig0 = (i64, i64, i64) -> i64 system_v
    fn0 = %s sig0
block0(v0: i64, v1: i64):
    v2 = iconst.i64 5
    v3 = call fn0(v0, v1, v2)
    return v3
}";
    let f = cranelift_reader::parse_functions(text).unwrap().remove(0);
    let mut b = settings::builder();
    b.set("opt_level", "none").unwrap();
    b.set("preserve_frame_pointers", "true").unwrap();
    let isa = cranelift_native::builder()
        .unwrap()
        .finish(settings::Flags::new(b))
        .unwrap();
    let mut ctx = Context::new();
    let n = 20000;
    let t = std::time::Instant::now();
    let mut bytes = 0;
    for _ in 0..n {
        ctx.clear();
        ctx.func = f.clone();
        bytes = ctx
            .compile(&*isa, &mut ControlPlane::default())
            .unwrap()
            .buffer
            .data()
            .len();
    }
    println!(
        "{:.2} us per thunk compile, {} bytes",
        t.elapsed().as_secs_f64() * 1e6 / n as f64,
        bytes
    );
}
