//! The device memory the driver counts for this process, as nvidia-smi shows it: NVML's
//! per-process figure (libnvidia-ml, loaded at run time: the driver installs it, and a build
//! without a GPU has none), else the device's used memory from the CUDA driver (every process's,
//! through torch's allocator). Read a few times a run, never per allocation.
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::OnceLock;

/// One reading of the driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DriverReading {
    /// Device memory in use, in bytes.
    pub bytes: i64,
    /// Whether it is this process's alone (NVML found it), not the device's.
    pub per_process: bool,
}

/// The bytes the driver counts for this process on CUDA device `cuda_index` (as torch numbers
/// devices), or the device's used bytes where NVML cannot say; None where neither can be read.
pub fn device_use(cuda_index: i32) -> Option<DriverReading> {
    if let Some(bytes) = nvml().and_then(|n| n.process_bytes(cuda_index)) {
        return Some(DriverReading {
            bytes,
            per_process: true,
        });
    }
    super::device_memory_info(cuda_index).map(|(free, total)| DriverReading {
        bytes: total - free,
        per_process: false,
    })
}

type Ret = c_int;
const NVML_SUCCESS: Ret = 0;
const NVML_ERROR_INSUFFICIENT_SIZE: Ret = 7;
/// NVML's "not available" value of a process's memory (a container may hide it).
const NOT_AVAILABLE: u64 = u64::MAX;

/// `nvmlProcessInfo_t` of the `_v2`/`_v3` calls.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct ProcessInfo {
    pid: c_uint,
    used_gpu_memory: u64,
    gpu_instance_id: c_uint,
    compute_instance_id: c_uint,
}

type Device = *mut c_void;

type InitFn = unsafe extern "C" fn() -> Ret;
type DeviceByBusIdFn = unsafe extern "C" fn(*const c_char, *mut Device) -> Ret;
type ProcessesFn = unsafe extern "C" fn(Device, *mut c_uint, *mut ProcessInfo) -> Ret;
type CuDeviceGetFn = unsafe extern "C" fn(*mut c_int, c_int) -> c_int;
type CuBusIdFn = unsafe extern "C" fn(*mut c_char, c_int, c_int) -> c_int;

/// The NVML and CUDA driver functions used, resolved once.
struct Nvml {
    device_by_bus_id: DeviceByBusIdFn,
    processes: ProcessesFn,
    cu_device_get: CuDeviceGetFn,
    cu_bus_id: CuBusIdFn,
}

// SAFETY: function pointers into loaded libraries, which stay loaded; NVML is thread-safe.
unsafe impl Send for Nvml {}
unsafe impl Sync for Nvml {}

fn nvml() -> Option<&'static Nvml> {
    static NVML: OnceLock<Option<Nvml>> = OnceLock::new();
    NVML.get_or_init(load).as_ref()
}

/// Opens `names` (the first that loads) and resolves `symbols` (the first found).
fn open(names: &[&CStr]) -> Option<*mut c_void> {
    names.iter().find_map(|name| {
        // SAFETY: dlopen with a NUL-terminated name; the handle is never closed.
        let h = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) };
        (!h.is_null()).then_some(h)
    })
}

fn symbol(lib: *mut c_void, names: &[&CStr]) -> Option<*mut c_void> {
    names.iter().find_map(|name| {
        // SAFETY: dlsym on a live handle with a NUL-terminated name.
        let f = unsafe { libc::dlsym(lib, name.as_ptr()) };
        (!f.is_null()).then_some(f)
    })
}

fn load() -> Option<Nvml> {
    let nvml = open(&[c"libnvidia-ml.so.1", c"libnvidia-ml.so"])?;
    let cuda = open(&[c"libcuda.so.1", c"libcuda.so"])?;
    let init = symbol(nvml, &[c"nvmlInit_v2", c"nvmlInit"])?;
    // SAFETY: the symbols are NVML's and the CUDA driver's, with these C signatures.
    unsafe {
        let init = std::mem::transmute::<*mut c_void, InitFn>(init);
        if init() != NVML_SUCCESS {
            return None;
        }
        Some(Nvml {
            device_by_bus_id: std::mem::transmute::<*mut c_void, DeviceByBusIdFn>(symbol(
                nvml,
                &[
                    c"nvmlDeviceGetHandleByPciBusId_v2",
                    c"nvmlDeviceGetHandleByPciBusId",
                ],
            )?),
            processes: std::mem::transmute::<*mut c_void, ProcessesFn>(symbol(
                nvml,
                &[
                    c"nvmlDeviceGetComputeRunningProcesses_v3",
                    c"nvmlDeviceGetComputeRunningProcesses_v2",
                ],
            )?),
            cu_device_get: std::mem::transmute::<*mut c_void, CuDeviceGetFn>(symbol(
                cuda,
                &[c"cuDeviceGet"],
            )?),
            cu_bus_id: std::mem::transmute::<*mut c_void, CuBusIdFn>(symbol(
                cuda,
                &[c"cuDeviceGetPCIBusId"],
            )?),
        })
    }
}

impl Nvml {
    /// This process's bytes on the device torch calls `cuda_index` (matched by PCI bus id:
    /// NVML numbers every device, CUDA only the visible ones).
    fn process_bytes(&self, cuda_index: i32) -> Option<i64> {
        let mut bus = [0 as c_char; 64];
        let mut dev: c_int = 0;
        let mut handle: Device = std::ptr::null_mut();
        // SAFETY: the buffers are as large as the calls are told; CUDA is initialised (torch
        // allocated on the device).
        unsafe {
            if (self.cu_device_get)(&mut dev, cuda_index) != 0
                || (self.cu_bus_id)(bus.as_mut_ptr(), bus.len() as c_int, dev) != 0
                || (self.device_by_bus_id)(bus.as_ptr(), &mut handle) != NVML_SUCCESS
            {
                return None;
            }
        }
        let mut infos = vec![ProcessInfo::default(); 64];
        loop {
            let mut count = infos.len() as c_uint;
            // SAFETY: `infos` has room for `count` entries.
            let rc = unsafe { (self.processes)(handle, &mut count, infos.as_mut_ptr()) };
            match rc {
                NVML_SUCCESS => {
                    infos.truncate(count as usize);
                    break;
                }
                NVML_ERROR_INSUFFICIENT_SIZE if (count as usize) > infos.len() => {
                    infos.resize(count as usize + 8, ProcessInfo::default());
                }
                _ => return None,
            }
        }
        let pid = std::process::id();
        infos
            .iter()
            .find(|p| p.pid == pid && p.used_gpu_memory != NOT_AVAILABLE)
            .map(|p| p.used_gpu_memory as i64)
    }
}

/// The CUDA devices the driver shows this process (CUDA_VISIBLE_DEVICES applied), as torch's
/// `device_count()` reads them through the runtime: for `memprof run`'s `--device` before the
/// script's torch is loaded. 0 without a driver. Initialises the driver (no context), as
/// torch's count did when memprof read it there.
pub fn cuda_device_count() -> i32 {
    type InitFn = unsafe extern "C" fn(c_uint) -> c_int;
    type CountFn = unsafe extern "C" fn(*mut c_int) -> c_int;
    let Some(cuda) = open(&[c"libcuda.so.1", c"libcuda.so"]) else {
        return 0;
    };
    let (Some(init), Some(count)) = (
        symbol(cuda, &[c"cuInit"]),
        symbol(cuda, &[c"cuDeviceGetCount"]),
    ) else {
        return 0;
    };
    let mut n: c_int = 0;
    // SAFETY: the CUDA driver's functions with these C signatures; writes one int.
    unsafe {
        let init = std::mem::transmute::<*mut c_void, InitFn>(init);
        let count = std::mem::transmute::<*mut c_void, CountFn>(count);
        if init(0) != 0 || count(&mut n) != 0 {
            return 0;
        }
    }
    n
}
