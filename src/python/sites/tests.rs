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
        // The interpreter's shim frame around a specialized call's `__init__` (3.13+).
        "__init__",
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

fn frame(file: &str, line: u32, function: &str) -> (String, u32, String) {
    (file.into(), line, function.into())
}

#[test]
fn a_compiled_files_line_stands_for_the_frames_of_the_node_whose_lines_hold_it() {
    let map = compiled::LineMap::new(
        vec![
            // Out of order, as a map may come: sorted by line.
            (
                120,
                vec![frame("/home/me/proj/model.py", 31, "Block.forward")],
            ),
            (100, vec![]),
            (
                110,
                vec![
                    frame(
                        "/venv/lib/python3.12/site-packages/torch/nn/functional.py",
                        2300,
                        "linear",
                    ),
                    frame("/home/me/proj/model.py", 20, "Mlp.forward"),
                    frame("/home/me/proj/model.py", 44, "Block.forward"),
                ],
            ),
        ],
        // Out of order too: (first line, tag).
        vec![(115, 2), (101, 1)],
        &rules(),
    );
    assert!(map.chain_at(99).is_none(), "before the first entry");
    assert_eq!(
        [100, 101, 114, 115, 5000].map(|l| map.tag_at(l)),
        [0, 1, 1, 2, 2],
        "a line's tag holds to the next tagged line"
    );
    assert!(map.chain_at(105).is_none(), "a node without a stack trace");
    let chain = map.chain_at(119).expect("the 110 entry");
    let places: Vec<_> = chain
        .iter()
        .map(|v| (v.place.line, v.place.function.as_str(), v.class))
        .collect();
    assert_eq!(
        places,
        [
            (2300, "linear", Class::Skip),
            (20, "Mlp.forward", Class::User),
            (44, "Block.forward", Class::User),
        ]
    );
    assert_eq!(map.chain_at(120).unwrap()[0].place.line, 31);
    assert_eq!(
        map.chain_at(5000).unwrap()[0].place.line,
        31,
        "to the file's end"
    );
    assert_eq!(map.frames().count(), 4);
}

#[test]
fn a_function_is_named_alike_by_a_compiled_frame_and_a_code_object() {
    assert_eq!(
        function_key("/p/model.py", "Block.forward"),
        function_key("/p/model.py", "Block.forward")
    );
    assert_ne!(
        function_key("/p/model.py", "Block.forward"),
        function_key("/p/model.py", "Block.__init__")
    );
    // What dynamo runs after a graph break is the function's own rest.
    assert_eq!(
        function_key("/p/model.py", "torch_dynamo_resume_in_forward_at_31"),
        function_key("/p/model.py", "Block.forward")
    );
}
