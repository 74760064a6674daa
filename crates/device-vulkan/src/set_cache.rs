//! Descriptor sets kept between launches: a kernel launched again on the buffers of its last
//! launch binds the set written for them then, instead of allocating and writing one per
//! launch. The sets come from a pool of the kernel's own (not the batch's, which is reset at
//! every submission); a set that is replaced is freed once the batch that may still use it
//! completes.

use std::any::Any as StdAny;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use ash::vk;

use crate::device::VulkanDevice;
use crate::error::{VkResult, vk_error};
use crate::memory::VulkanBuffer;

/// Sets one cache holds at once: the current one and those replaced while their batch runs.
const CACHED_SETS: u32 = 8;

/// The descriptor set of a kernel's last launch on one device, and the pool it came from.
pub(crate) struct SetCache {
    device: Arc<VulkanDevice>,
    pool: vk::DescriptorPool,
    last: Mutex<Option<CachedSet>>,
}

/// A tensor binding of the cached set. The weak reference keeps the buffer object's address
/// from being reused while the key exists, so an equal address is the same buffer.
struct BindingKey {
    buffer: Weak<VulkanBuffer>,
    info: vk::DescriptorBufferInfo,
}

struct CachedSet {
    keys: Vec<BindingKey>,
    set: vk::DescriptorSet,
}

/// A replaced set, freed when the batch that holds it completes.
struct RetiredSet {
    cache: Arc<SetCache>,
    set: vk::DescriptorSet,
}

impl Drop for RetiredSet {
    fn drop(&mut self) {
        // SAFETY: the batch that could use the set has completed (this is dropped with its
        // keep-alive list), and the pool allows freeing single sets.
        let _ = unsafe {
            self.cache
                .device
                .raw
                .free_descriptor_sets(self.cache.pool, &[self.set])
        };
    }
}

impl SetCache {
    /// A cache for sets of `num_buffers` storage buffers.
    pub(crate) fn new(device: &Arc<VulkanDevice>, num_buffers: usize) -> VkResult<SetCache> {
        let sizes = [vk::DescriptorPoolSize {
            ty: vk::DescriptorType::STORAGE_BUFFER,
            descriptor_count: CACHED_SETS * (num_buffers.max(1) as u32),
        }];
        let info = vk::DescriptorPoolCreateInfo::default()
            .flags(vk::DescriptorPoolCreateFlags::FREE_DESCRIPTOR_SET)
            .max_sets(CACHED_SETS)
            .pool_sizes(&sizes);
        // SAFETY: a creation on a live device.
        let pool = unsafe { device.raw.create_descriptor_pool(&info, None) }
            .map_err(|e| vk_error("vkCreateDescriptorPool", e))?;
        Ok(SetCache {
            device: Arc::clone(device),
            pool,
            last: Mutex::new(None),
        })
    }

    /// The set binding `buffers` as `infos` describe them: the cached one when it binds the
    /// same, else a new one of `layout` written now (the replaced one goes into `keep`, the
    /// batch's keep-alive list). `None` when the pool has no set free: the caller allocates from
    /// the batch instead.
    pub(crate) fn set_for(
        self: &Arc<Self>,
        layout: vk::DescriptorSetLayout,
        buffers: &[&Arc<VulkanBuffer>],
        infos: &[vk::DescriptorBufferInfo],
        keep: &mut Vec<Arc<dyn StdAny + Send + Sync>>,
    ) -> VkResult<Option<vk::DescriptorSet>> {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        let same = last.as_ref().is_some_and(|cached| {
            cached.keys.len() == buffers.len()
                && cached
                    .keys
                    .iter()
                    .zip(buffers.iter().zip(infos))
                    .all(|(key, (b, info))| {
                        Weak::as_ptr(&key.buffer) == Arc::as_ptr(b)
                            && key.info.offset == info.offset
                            && key.info.range == info.range
                    })
        });
        if same {
            return Ok(last.as_ref().map(|cached| cached.set));
        }
        let layouts = [layout];
        let alloc = vk::DescriptorSetAllocateInfo::default()
            .descriptor_pool(self.pool)
            .set_layouts(&layouts);
        // SAFETY: the pool belongs to this device and is used under the cache's lock.
        let set = match unsafe { self.device.raw.allocate_descriptor_sets(&alloc) } {
            Ok(sets) => sets[0],
            Err(vk::Result::ERROR_OUT_OF_POOL_MEMORY | vk::Result::ERROR_FRAGMENTED_POOL) => {
                return Ok(None);
            }
            Err(e) => return Err(vk_error("vkAllocateDescriptorSets", e)),
        };
        let writes: Vec<_> = infos
            .iter()
            .enumerate()
            .map(|(b, info)| {
                vk::WriteDescriptorSet::default()
                    .dst_set(set)
                    .dst_binding(b as u32)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .buffer_info(std::slice::from_ref(info))
            })
            .collect();
        // SAFETY: the set is new (no command uses it) and the buffers are live.
        unsafe { self.device.raw.update_descriptor_sets(&writes, &[]) };
        let keys = buffers
            .iter()
            .zip(infos)
            .map(|(b, info)| BindingKey {
                buffer: Arc::downgrade(b),
                info: *info,
            })
            .collect();
        if let Some(old) = last.replace(CachedSet { keys, set }) {
            keep.push(Arc::new(RetiredSet {
                cache: Arc::clone(self),
                set: old.set,
            }));
        }
        Ok(Some(set))
    }
}

impl Drop for SetCache {
    fn drop(&mut self) {
        // SAFETY: no batch holds the cache any more (retired sets keep it alive), so no
        // command uses its sets; destroying the pool frees them all.
        unsafe { self.device.raw.destroy_descriptor_pool(self.pool, None) };
    }
}
