//! Which files are looked through, a library's, or the user's.
use super::*;

fn rules() -> Rules {
    Rules {
        tool_prefixes: vec!["/venv/lib/python3.12/site-packages/torch/".into()],
        skip_markers: vec!["/torchinductor_".into()],
        library_prefixes: vec!["/usr/lib/python3.12/".into()],
        user_prefixes: vec!["/home/me/proj/".into()],
    }
}

#[test]
fn torch_the_standard_library_memprof_and_inductors_files_are_looked_through() {
    let r = rules();
    for file in [
        "/venv/lib/python3.12/site-packages/torch/nn/modules/module.py",
        "/usr/lib/python3.12/contextlib.py",
        "<frozen runpy>",
        "<memprof>",
        "/tmp/torchinductor_me/ab/cabc123.py",
    ] {
        assert_eq!(r.classify(file), Class::Skip, "{file}");
    }
}

#[test]
fn installed_packages_are_libraries_even_under_the_standard_librarys_folder() {
    let r = rules();
    for file in [
        "/venv/lib/python3.12/site-packages/transformers/models/gpt2/modeling_gpt2.py",
        "/usr/lib/python3.12/site-packages/accelerate/accelerator.py",
        "/home/me/proj/.venv/lib/python3.12/site-packages/timm/layers/mlp.py",
        "/opt/other/code.py",
    ] {
        assert_eq!(r.classify(file), Class::Library, "{file}");
    }
}

#[test]
fn the_scripts_folder_and_unnamed_sources_are_the_users() {
    let r = rules();
    for file in [
        "/home/me/proj/train.py",
        "/home/me/proj/model/gpt.py",
        "<string>",
        "<stdin>",
    ] {
        assert_eq!(r.classify(file), Class::User, "{file}");
    }
}
