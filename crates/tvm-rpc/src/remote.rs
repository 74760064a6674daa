//! A session as ordinary runtime values: remote functions are [`Function`]s, remote memory is a
//! device of the registry (`device_type + 128 * (index + 1)`), returned tensors are [`Tensor`]s
//! on that device, and remote objects are freed when their last local reference goes.

use std::collections::{HashMap, HashSet};
use std::ffi::c_void;
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError, Weak};

use tvm_ffi::abi::{
    DLDevice, DLTensor, kTVMFFIBool, kTVMFFIByteArrayPtr, kTVMFFIBytes, kTVMFFIDataType,
    kTVMFFIDevice, kTVMFFIFloat, kTVMFFIFunction, kTVMFFIInt, kTVMFFIModule, kTVMFFINone,
    kTVMFFIOpaquePtr, kTVMFFIRawStr, kTVMFFISmallBytes, kTVMFFISmallStr, kTVMFFIStr, kTVMFFITensor,
};
use tvm_ffi::{
    Any, AnyView, DataType, Device, Error, ErrorKind, Function, Object, ObjectCore, ObjectRef,
    Result, Tensor,
};

use crate::codec::{RPC_OBJECT_REF_INDEX, TensorMeta, WireValue};
use crate::protocol::RPC_SESS_MASK;
use crate::session::RpcSession;

/// The most sessions alive at once in one process.
pub const MAX_SESSIONS: usize = 1024;

/// A session with its slot in the process's session table.
pub struct SessionCore {
    session: Arc<dyn RpcSession>,
    index: usize,
    /// Remote devices known to exist (asked once: every allocation and copy checks).
    existing_devices: Mutex<HashSet<(i32, i32)>>,
}

impl std::fmt::Debug for SessionCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SessionCore({}, {})", self.index, self.session.name())
    }
}

static SESSIONS: LazyLock<Mutex<Vec<Weak<SessionCore>>>> = LazyLock::new(Default::default);

/// Objects this process holds on some session's remote side, by the address of the local
/// object that stands for them: (session index, remote handle).
static REMOTE_OBJECTS: LazyLock<Mutex<HashMap<usize, (usize, u64)>>> =
    LazyLock::new(Default::default);

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl SessionCore {
    /// Puts `session` in the session table.
    pub fn register(session: Arc<dyn RpcSession>) -> Result<Arc<SessionCore>> {
        let mut table = lock(&SESSIONS);
        let index = match table.iter().position(|slot| slot.strong_count() == 0) {
            Some(free) => free,
            None if table.len() < MAX_SESSIONS => {
                table.push(Weak::new());
                table.len() - 1
            }
            None => tvm_ffi::bail!(
                ErrorKind::RuntimeError,
                "the maximum number of RPC sessions ({MAX_SESSIONS}) is reached; close some"
            ),
        };
        let core = Arc::new(SessionCore {
            session,
            index,
            existing_devices: Mutex::default(),
        });
        table[index] = Arc::downgrade(&core);
        Ok(core)
    }

    /// The live session with table index `index`.
    pub fn get(index: usize) -> Result<Arc<SessionCore>> {
        lock(&SESSIONS)
            .get(index)
            .and_then(Weak::upgrade)
            .ok_or_else(|| {
                Error::new(
                    "RPCError",
                    format!("RPC session {index} is closed (its devices and values are gone)"),
                )
            })
    }

    /// The session of a remote device (`device_type >= 128`), and the device as the remote
    /// knows it.
    pub fn of_device(device: DLDevice) -> Result<(Arc<SessionCore>, DLDevice)> {
        if device.device_type < RPC_SESS_MASK {
            tvm_ffi::bail!(
                ErrorKind::ValueError,
                "device ({}, {}) is not a remote device",
                device.device_type,
                device.device_id
            );
        }
        let index = (device.device_type / RPC_SESS_MASK - 1) as usize;
        let core = SessionCore::get(index)?;
        let remote = DLDevice {
            device_type: device.device_type % RPC_SESS_MASK,
            device_id: device.device_id,
        };
        Ok((core, remote))
    }

    /// The session.
    pub fn session(&self) -> &Arc<dyn RpcSession> {
        &self.session
    }

    /// Whether remote `device` exists, asking the remote only until it said yes once.
    pub fn device_exists(&self, device: DLDevice) -> Result<bool> {
        let key = (device.device_type, device.device_id);
        if lock(&self.existing_devices).contains(&key) {
            return Ok(true);
        }
        let answer = self.session.device_call(
            crate::protocol::RpcCode::DevGetAttr,
            vec![WireValue::Device(device), WireValue::Int(0)],
        )?;
        let exists = answer.as_int().is_some_and(|v| v != 0);
        if exists {
            lock(&self.existing_devices).insert(key);
        }
        Ok(exists)
    }

    /// The slot in the session table.
    pub fn index(&self) -> usize {
        self.index
    }

    /// `device` of the remote, as a device of this process.
    pub fn device(&self, device: DLDevice) -> Result<Device> {
        if device.device_type >= RPC_SESS_MASK || device.device_type < 0 {
            tvm_ffi::bail!(
                ErrorKind::ValueError,
                "device type {} is already a remote device type",
                device.device_type
            );
        }
        Ok(Device::new(
            device.device_type + RPC_SESS_MASK * (self.index as i32 + 1),
            device.device_id,
        ))
    }

    /// Global function `name` of the remote; `None` if it has none.
    pub fn get_function(self: &Arc<Self>, name: &str) -> Result<Option<Function>> {
        match self.session.get_function(name)? {
            0 => Ok(None),
            handle => Ok(Some(self.wrap_function(handle))),
        }
    }

    /// Calls remote function `handle` with local arguments; the result as a local value.
    pub fn call(self: &Arc<Self>, handle: u64, args: &[AnyView<'_>]) -> Result<Any> {
        let wire = args
            .iter()
            .enumerate()
            .map(|(i, arg)| self.to_wire(i, arg))
            .collect::<Result<Vec<_>>>()?;
        let values = self.session.call_function(handle, wire)?;
        self.from_return(values)
    }

    /// A local function that calls remote function `handle` (freed when the last reference
    /// goes).
    pub fn wrap_function(self: &Arc<Self>, handle: u64) -> Function {
        let owner = RemoteHandle::new(self, handle);
        let inner = Arc::clone(&owner);
        let function = Function::from_packed(move |args| inner.core.call(inner.handle, args));
        owner.publish(function.as_object().as_raw() as usize);
        function
    }

    /// A local object standing for any other remote object (an `ffi.Array` the remote
    /// returned, say): opaque here, usable as an argument of this session's functions, and
    /// freed on the remote with its last local reference.
    pub fn wrap_object(self: &Arc<Self>, handle: u64) -> ObjectRef<RemoteObjectObj> {
        let holder = RemoteHandle::new(self, handle);
        let object = ObjectRef::new(RemoteObjectObj {
            base: Object::header(),
            holder: Arc::clone(&holder),
        });
        holder.publish(object.as_raw() as usize);
        object
    }

    /// A local argument as a wire value, checked against the protocol's rules.
    fn to_wire(&self, position: usize, arg: &AnyView<'_>) -> Result<WireValue> {
        let index = arg.type_index();
        Ok(match index {
            kTVMFFINone => WireValue::None,
            kTVMFFIInt => WireValue::Int(arg.cast()?),
            kTVMFFIBool => WireValue::Bool(arg.cast()?),
            kTVMFFIFloat => WireValue::Float(arg.cast()?),
            kTVMFFIOpaquePtr => WireValue::Handle(arg.cast::<*mut c_void>()? as usize as u64),
            kTVMFFIDataType => WireValue::DataType(arg.cast::<DataType>()?.0),
            kTVMFFIDevice => WireValue::Device(self.remote_device(arg.cast::<Device>()?.0)?),
            kTVMFFIRawStr | kTVMFFISmallStr | kTVMFFIStr => {
                let text = tvm_ffi::String::try_from_view(arg)
                    .ok_or_else(|| Error::new(ErrorKind::TypeError, "unreadable string"))?;
                WireValue::RawStr(text.as_bytes().to_vec())
            }
            kTVMFFIByteArrayPtr | kTVMFFISmallBytes | kTVMFFIBytes => {
                let bytes = tvm_ffi::Bytes::try_from_view(arg)
                    .ok_or_else(|| Error::new(ErrorKind::TypeError, "unreadable bytes"))?;
                WireValue::Bytes(bytes.as_bytes().to_vec())
            }
            kTVMFFITensor => WireValue::Tensor(self.tensor_meta(position, &arg.cast()?)?),
            kTVMFFIFunction if !self.is_own_object(arg) => {
                // A local function: the remote calls it back (own protocol version only).
                self.session.export_callback(arg.cast()?)?
            }
            kTVMFFIFunction => WireValue::Function(self.own_handle(position, arg)?),
            kTVMFFIModule => WireValue::Module(self.own_handle(position, arg)?),
            _ if arg.as_object_ptr().is_some() => WireValue::Object {
                type_index: RPC_OBJECT_REF_INDEX,
                handle: self.own_handle(position, arg)?,
            },
            _ => tvm_ffi::bail!(
                ErrorKind::TypeError,
                "argument {position} of type {} cannot be passed to a remote function",
                arg.type_key()
            ),
        })
    }

    /// Whether `arg` stands for an object on the remote side of some session.
    fn is_own_object(&self, arg: &AnyView<'_>) -> bool {
        let address = arg.as_object_ptr().map(|p| p as usize).unwrap_or(0);
        lock(&REMOTE_OBJECTS).contains_key(&address)
    }

    /// The handle of an object of this session passed back to it.
    fn own_handle(&self, position: usize, arg: &AnyView<'_>) -> Result<u64> {
        let address = arg.as_object_ptr().map(|p| p as usize).unwrap_or(0);
        match lock(&REMOTE_OBJECTS).get(&address) {
            Some(&(index, handle)) if index == self.index => Ok(handle),
            Some(_) => tvm_ffi::bail!(
                ErrorKind::ValueError,
                "argument {position} ({}) belongs to another RPC session",
                arg.type_key()
            ),
            None => tvm_ffi::bail!(
                ErrorKind::TypeError,
                "argument {position} is a local {}, which cannot be passed to a remote function \
                 (only values, tensors on this session's devices and this session's objects can)",
                arg.type_key()
            ),
        }
    }

    /// A device argument as the remote knows it.
    fn remote_device(&self, device: DLDevice) -> Result<DLDevice> {
        if device.device_type < RPC_SESS_MASK {
            return Ok(device);
        }
        let (core, remote) = SessionCore::of_device(device)?;
        if core.index != self.index {
            tvm_ffi::bail!(
                ErrorKind::ValueError,
                "a device of RPC session {} cannot be passed to session {}",
                core.index,
                self.index
            );
        }
        Ok(remote)
    }

    fn tensor_meta(&self, position: usize, tensor: &Tensor) -> Result<TensorMeta> {
        let dl = tensor.dltensor();
        if dl.device.device_type < RPC_SESS_MASK {
            tvm_ffi::bail!(
                ErrorKind::ValueError,
                "argument {position} is a tensor on local device {}; copy it to this session's \
                 device first",
                tensor.device()
            );
        }
        if !tensor.is_contiguous() {
            tvm_ffi::bail!(
                ErrorKind::ValueError,
                "argument {position} is a non-contiguous tensor; RPC passes compact tensors only"
            );
        }
        Ok(TensorMeta {
            data: dl.data as usize as u64,
            device: self.remote_device(dl.device)?,
            dtype: dl.dtype,
            shape: tensor.shape().to_vec(),
            byte_offset: dl.byte_offset,
        })
    }

    /// A returned value list as a local value.
    fn from_return(self: &Arc<Self>, values: Vec<WireValue>) -> Result<Any> {
        let mut values = values.into_iter();
        let malformed = || Error::new("RPCError", "the remote returned a malformed value list");
        let tag = values
            .next()
            .and_then(|v| v.as_int())
            .ok_or_else(malformed)?;
        let first = values.next().unwrap_or(WireValue::None);
        let handle = |v: &WireValue| v.as_handle().ok_or_else(malformed);
        Ok(match i32::try_from(tag).map_err(|_| malformed())? {
            kTVMFFINone => Any::none(),
            kTVMFFIFunction => Any::from(self.wrap_function(handle(&first)?)),
            kTVMFFIModule => Any::from(self.wrap_module(handle(&first)?).as_object().clone()),
            kTVMFFITensor => {
                let WireValue::Tensor(meta) = first else {
                    return Err(malformed());
                };
                let owner = handle(&values.next().ok_or_else(malformed)?)?;
                Any::from(self.remote_tensor(&meta, owner)?)
            }
            kTVMFFISmallStr | kTVMFFIStr => {
                let text = first.as_bytes().ok_or_else(malformed)?;
                tvm_ffi::String::from_bytes(text).into_any()
            }
            kTVMFFISmallBytes | kTVMFFIBytes => {
                let bytes = first.as_bytes().ok_or_else(malformed)?;
                tvm_ffi::Bytes::from_bytes(bytes).into_any()
            }
            index if index >= tvm_ffi::abi::kTVMFFIStaticObjectBegin => {
                Any::from(self.wrap_object(handle(&first)?))
            }
            _ => match first {
                WireValue::None => Any::none(),
                WireValue::Int(v) => Any::from(v),
                WireValue::Bool(v) => Any::from(v),
                WireValue::Float(v) => Any::from(v),
                WireValue::Handle(v) => Any::from(v as usize as *mut c_void),
                WireValue::DataType(d) => Any::from(DataType(d)),
                WireValue::Device(d) => Any::from(Device(d)),
                _ => return Err(malformed()),
            },
        })
    }

    /// A local tensor on this session's device whose memory is the remote tensor `owner`.
    fn remote_tensor(self: &Arc<Self>, meta: &TensorMeta, owner: u64) -> Result<Tensor> {
        let device = self.device(meta.device)?;
        let holder = RemoteHandle::new(self, owner);
        let mut shape = meta.shape.clone();
        let prototype = DLTensor {
            data: meta.data as usize as *mut c_void,
            device: device.0,
            ndim: shape.len() as i32,
            dtype: meta.dtype,
            shape: shape.as_mut_ptr(),
            strides: std::ptr::null_mut(),
            byte_offset: meta.byte_offset,
        };
        let mut record = (Arc::into_raw(holder) as usize).to_ne_bytes();
        // SAFETY: the descriptor is complete; its memory is remote and only reached through
        // this session's device backend, which the holder keeps open until `release_remote`
        // runs once with the copied record.
        unsafe { Tensor::from_foreign(&prototype, false, &mut record, release_remote) }
    }
}

unsafe extern "C" fn release_remote(record: *mut c_void) {
    // SAFETY: the record holds the address `remote_tensor` stored, released once.
    let address = unsafe { record.cast::<usize>().read_unaligned() };
    // SAFETY: the address came from `Arc::into_raw` of a holder, consumed once here.
    drop(unsafe { Arc::from_raw(address as *const RemoteHandle) });
}

/// `runtime.RPCObjectRef`: a reference to an object that lives on the remote side of a session
/// (see [`SessionCore::wrap_object`]).
#[repr(C)]
pub struct RemoteObjectObj {
    base: Object,
    holder: Arc<RemoteHandle>,
}

impl RemoteObjectObj {
    /// The remote handle.
    pub fn handle(&self) -> u64 {
        self.holder.handle
    }
}

// SAFETY: repr(C) with the header first; the index is the one the runtime assigned to the key,
// registered with this struct's size.
unsafe impl ObjectCore for RemoteObjectObj {
    const TYPE_KEY: &'static str = "runtime.RPCObjectRef";
    fn type_index() -> i32 {
        static INDEX: std::sync::OnceLock<i32> = std::sync::OnceLock::new();
        *INDEX.get_or_init(|| {
            let index = tvm_ffi::types::register_type(
                Self::TYPE_KEY,
                <Object as ObjectCore>::type_index(),
                0,
                true,
            )
            .unwrap_or_else(|e| panic!("cannot register runtime.RPCObjectRef: {e}"));
            let _ = tvm_ffi::reflection::register_metadata(index, std::mem::size_of::<Self>());
            index
        })
    }
}

/// A remote object held on behalf of a local value; freed on the remote when dropped.
pub struct RemoteHandle {
    core: Arc<SessionCore>,
    handle: u64,
    local_address: Mutex<usize>,
}

impl RemoteHandle {
    pub(crate) fn new(core: &Arc<SessionCore>, handle: u64) -> Arc<RemoteHandle> {
        Arc::new(RemoteHandle {
            core: Arc::clone(core),
            handle,
            local_address: Mutex::new(0),
        })
    }

    /// Records the local object that stands for this handle, so it can be passed back.
    pub(crate) fn publish(&self, address: usize) {
        *lock(&self.local_address) = address;
        lock(&REMOTE_OBJECTS).insert(address, (self.core.index, self.handle));
    }

    /// The session.
    pub fn core(&self) -> &Arc<SessionCore> {
        &self.core
    }

    /// The remote handle.
    pub fn handle(&self) -> u64 {
        self.handle
    }
}

impl Drop for RemoteHandle {
    fn drop(&mut self) {
        let address = *lock(&self.local_address);
        if address != 0 {
            lock(&REMOTE_OBJECTS).remove(&address);
        }
        // A closed connection already released everything on the remote.
        let _ = self.core.session.free_handle(self.handle);
    }
}

/// Session modules by the address of their module object.
static SESSION_MODULES: LazyLock<Mutex<HashMap<usize, Weak<SessionCore>>>> =
    LazyLock::new(Default::default);

/// Records that the module object at `address` stands for session `core`.
pub(crate) fn publish_session_module(address: usize, core: &Arc<SessionCore>) {
    lock(&SESSION_MODULES).insert(address, Arc::downgrade(core));
}

/// Forgets the session module at `address` (it is being destroyed).
pub(crate) fn forget_session_module(address: usize) {
    lock(&SESSION_MODULES).remove(&address);
}

/// The session behind a session module (an `"rpc"` module from `rpc.Connect` or
/// `rpc.LocalSession`).
pub fn session_core_of_module(module: &Any) -> Result<Arc<SessionCore>> {
    let address = module.as_object_ptr().map(|p| p as usize).unwrap_or(0);
    lock(&SESSION_MODULES)
        .get(&address)
        .and_then(Weak::upgrade)
        .ok_or_else(|| {
            Error::new(
                ErrorKind::ValueError,
                format!("expected an RPC session module, got {}", module.type_key()),
            )
        })
}

/// The session of a session module.
pub fn session_of_module(module: &Any) -> Result<Arc<dyn RpcSession>> {
    session_core_of_module(module).map(|core| Arc::clone(core.session()))
}
